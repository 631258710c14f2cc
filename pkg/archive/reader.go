package archive

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/klauspost/compress/gzip"
	"hash"
	"io"
	"sort"
	"strings"
)

// ErrCorrupt is wrapped by every error that means the archive is damaged,
// truncated or does not match its manifest or commit marker.
var ErrCorrupt = errors.New("the archive is damaged or was modified; it is not restored")

// MaxEntrySize bounds one entry (bytes), so a hostile archive cannot make
// the reader allocate without limit. The API server's own limit for one
// object is 3 MiB in etcd; 64 MiB leaves room for Velero's extras.
const MaxEntrySize = 64 << 20

// MaxManifestSize bounds ferry/manifest.json. The manifest grows with the
// number of objects (about 300 bytes each: 73 MB for a 200,000-object
// backup), and it is spooled to disk and decoded one entry at a time, so
// it is not held in memory; 4 GiB is some ten million objects.
const MaxManifestSize = 4 << 30

// Expect is what the commit marker (ferry-backup.json) says about the
// archive. Zero fields are not checked.
type Expect struct {
	Size           int64
	SHA256         string
	ManifestSHA256 string
	// AllowNoManifest accepts archives without ferry/manifest.json (Velero's).
	AllowNoManifest bool
}

// Archive is a read and verified archive. Its items' bytes wait in a
// spool file on local disk (Read), or were not kept (Verify): memory holds
// only each item's Entry. Close removes the spool.
type Archive struct {
	Version string
	// Manifest is the archive's manifest, without its Entries: they are
	// the Items' (held once). nil for an archive without one (Velero's).
	Manifest *Manifest
	Items    []Item
	spool    *spool
}

// Close removes the archive's spool file; its items cannot be read after.
// It may be called more than once, and on a nil Archive.
func (a *Archive) Close() error {
	if a == nil || a.spool == nil {
		return nil
	}
	err := a.spool.Close()
	a.spool = nil
	return err
}

type hashCounter struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (c *hashCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// Read reads a whole archive from r in one streaming pass and verifies it
// before returning anything: the size and SHA-256 of the tar.gz against
// exp, the manifest against exp.ManifestSHA256, and every entry against
// its manifest SHA-256. Entries missing from the archive or not listed in
// the manifest are errors. name (the store key) is used in error
// messages. Every verification error wraps ErrCorrupt.
//
// The entries' bytes are written to a spool file in os.TempDir ($TMPDIR)
// as they are read, not kept in memory; Item.Read reads one back. The
// caller must Close the archive, which removes the file (it is removed on
// an error too).
func Read(r io.Reader, name string, exp Expect) (*Archive, error) {
	return read(r, name, exp, true)
}

// Verify checks an archive as Read does, keeping no item bytes: its
// Items have their entries, and Item.Read fails with ErrNoData. Only the
// manifest goes through a spool file, removed before Verify returns.
func Verify(r io.Reader, name string, exp Expect) (*Archive, error) {
	return read(r, name, exp, false)
}

func read(r io.Reader, name string, exp Expect, keep bool) (*Archive, error) {
	sp, err := newSpool()
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", name, err)
	}
	a, err := readVerified(r, name, exp, sp, keep)
	if err != nil || !keep {
		sp.Close()
	}
	if err != nil {
		return nil, err
	}
	if keep {
		a.spool = sp
	}
	return a, nil
}

func readVerified(r io.Reader, name string, exp Expect, sp *spool, keep bool) (*Archive, error) {
	hr := &hashCounter{r: r, h: sha256.New()}
	a, perr := readTar(hr, name, exp, sp, keep)
	var se *spoolError
	if errors.As(perr, &se) {
		return nil, perr // a local failure: reading on would not help
	}
	// Drain so that the digest covers the whole object even after a parse error.
	if _, err := io.Copy(io.Discard, hr); err != nil && perr == nil {
		return nil, fmt.Errorf("reading archive %s: %w", name, err)
	}
	sum := hex.EncodeToString(hr.h.Sum(nil))
	if exp.Size > 0 && hr.n != exp.Size {
		what := "longer"
		if hr.n < exp.Size {
			what = "truncated"
		}
		return nil, fmt.Errorf("archive %s is %s: %d bytes, the backup's commit says %d: %w", name, what, hr.n, exp.Size, ErrCorrupt)
	}
	if exp.SHA256 != "" && sum != exp.SHA256 {
		detail := ""
		if perr != nil {
			detail = " (" + strings.TrimSuffix(perr.Error(), ": "+ErrCorrupt.Error()) + ")"
		}
		return nil, fmt.Errorf("archive %s does not match the backup's commit: SHA-256 %s, want %s%s: %w", name, sum, exp.SHA256, detail, ErrCorrupt)
	}
	if perr != nil {
		return nil, perr
	}
	return a, nil
}

// spooled is where one entry's bytes are in the spool, and their SHA-256.
type spooled struct {
	off, size int64
	sum       [sha256.Size]byte
}

// tarPass is the state of the one pass over the tar stream.
type tarPass struct {
	sp      *spool
	h       hash.Hash
	buf     []byte
	entries map[string]spooled // resources/... entries by path
}

// copyEntry hashes the size bytes of the current entry, writing them to
// the spool when they are kept (always for the manifest).
func (p *tarPass) copyEntry(tr io.Reader, size int64, keep bool) (spooled, error) {
	p.h.Reset()
	s := spooled{off: p.sp.n, size: size}
	var w io.Writer = p.h
	if keep {
		w = io.MultiWriter(p.h, p.sp)
	}
	n, err := io.CopyBuffer(w, io.LimitReader(tr, size), p.buf)
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	p.h.Sum(s.sum[:0])
	if !keep {
		s.off = -1
	}
	return s, err
}

func readTar(r io.Reader, name string, exp Expect, sp *spool, keep bool) (*Archive, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("archive %s: %s: %w", name, fmt.Sprintf(format, args...), ErrCorrupt)
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, corrupt("not a gzip stream (%v)", err)
	}
	tr := tar.NewReader(gz)
	a := &Archive{}
	p := &tarPass{sp: sp, h: sha256.New(), buf: make([]byte, 32<<10), entries: map[string]spooled{}}
	var manifest *spooled
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, corrupt("truncated or damaged after %d entries (%v)", len(p.entries), err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		limit := int64(MaxEntrySize)
		if hdr.Name == ManifestPath {
			limit = MaxManifestSize
		}
		if hdr.Size > limit || hdr.Size < 0 {
			return nil, corrupt("entry %s is %d bytes, more than the %d allowed", hdr.Name, hdr.Size, limit)
		}
		if hdr.Name == VersionPath {
			b, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
			if err != nil || int64(len(b)) != hdr.Size {
				return nil, corrupt("entry %s is truncated (%v)", hdr.Name, err)
			}
			a.Version = strings.TrimSpace(string(b))
			continue
		}
		// Items are spooled when kept (Read), only hashed otherwise
		// (Verify); the manifest is always spooled, to be decoded last.
		isItem := strings.HasPrefix(hdr.Name, "resources/")
		s, err := p.copyEntry(tr, hdr.Size, (isItem && keep) || hdr.Name == ManifestPath)
		var se *spoolError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("archive %s: %w", name, err)
		}
		if err != nil {
			return nil, corrupt("entry %s is truncated (%v)", hdr.Name, err)
		}
		switch {
		case hdr.Name == ManifestPath:
			manifest = &s
		case isItem:
			if _, dup := p.entries[hdr.Name]; dup {
				return nil, corrupt("entry %s appears twice", hdr.Name)
			}
			p.entries[hdr.Name] = s
		}
	}
	// A gzip stream must end cleanly; io.EOF from tar does not prove it.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return nil, corrupt("damaged gzip trailer (%v)", err)
	}
	if err := sp.flush(); err != nil {
		return nil, fmt.Errorf("archive %s: %w", name, err)
	}
	if a.Version == "" {
		return nil, corrupt("no %s entry", VersionPath)
	}
	if manifest == nil {
		if !exp.AllowNoManifest {
			return nil, corrupt("no %s: the archive is incomplete", ManifestPath)
		}
		return p.withoutManifest(a), nil
	}
	if exp.ManifestSHA256 != "" {
		if got := hex.EncodeToString(manifest.sum[:]); got != exp.ManifestSHA256 {
			return nil, corrupt("%s has SHA-256 %s, the backup's commit says %s", ManifestPath, got, exp.ManifestSHA256)
		}
	}
	return p.withManifest(a, name, manifest, corrupt)
}

// withManifest decodes the spooled manifest, checking each of its entries
// against the archive's as it comes, and builds the items in its order.
func (p *tarPass) withManifest(a *Archive, name string, manifest *spooled, corrupt func(string, ...any) error) (*Archive, error) {
	var itemErr error
	a.Items = make([]Item, 0, len(p.entries))
	strs := map[string]string{}
	m, err := decodeManifest(bufio.NewReaderSize(io.NewSectionReader(p.sp, manifest.off, manifest.size), 64<<10), func(e Entry) error {
		s, ok := p.entries[e.Path]
		var got [2 * sha256.Size]byte
		hex.Encode(got[:], s.sum[:])
		switch {
		case !ok:
			itemErr = corrupt("entry %s is listed in the manifest but missing", e.Path)
		case string(got[:]) != e.SHA256:
			itemErr = corrupt("entry %s has SHA-256 %s, the manifest says %s", e.Path, got[:], e.SHA256)
		case s.size != e.Size:
			itemErr = corrupt("entry %s is %d bytes, the manifest says %d", e.Path, s.size, e.Size)
		default:
			delete(p.entries, e.Path)
			a.Items = append(a.Items, p.item(compact(e, strs), s))
		}
		return itemErr
	})
	if itemErr != nil {
		return nil, itemErr
	}
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w: %w", name, err, ErrCorrupt)
	}
	a.Manifest = m
	if len(p.entries) > 0 {
		extra := make([]string, 0, len(p.entries))
		for path := range p.entries {
			extra = append(extra, path)
		}
		sort.Strings(extra)
		return nil, corrupt("entry %s is not listed in the manifest (%d such entries)", extra[0], len(extra))
	}
	return a, nil
}

// compact shares the strings that repeat from entry to entry (group,
// version, resource, kind, namespace) through strs, and takes the name
// out of the path, so that the entries of many items take little memory.
func compact(e Entry, strs map[string]string) Entry {
	for _, f := range []*string{&e.Group, &e.Version, &e.Resource, &e.Kind, &e.Namespace} {
		if v, ok := strs[*f]; ok {
			*f = v
		} else {
			strs[*f] = *f
		}
	}
	if base := e.Path[strings.LastIndexByte(e.Path, '/')+1:]; base == e.Name+".json" {
		e.Name = base[:len(e.Name)]
	}
	return e
}

// item is the Item of entry e, spooled at s (no bytes when not kept).
func (p *tarPass) item(e Entry, s spooled) Item {
	if s.off < 0 {
		return Item{Entry: e}
	}
	return Item{Entry: e, src: p.sp, off: s.off}
}

// withoutManifest builds items from paths alone (Velero archives).
func (p *tarPass) withoutManifest(a *Archive) *Archive {
	paths := make([]string, 0, len(p.entries))
	for path := range p.entries {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		gr, version, ns, name, ok := ParseItemPath(path)
		if !ok {
			continue
		}
		resource, group, _ := strings.Cut(gr, ".")
		s := p.entries[path]
		a.Items = append(a.Items, p.item(Entry{Path: path, Group: group, Resource: resource, Version: strings.TrimSuffix(version, "-preferredversion"),
			Namespace: ns, Name: name, Size: s.size, SHA256: hex.EncodeToString(s.sum[:])}, s))
	}
	return a
}
