package archive

import (
	"archive/tar"
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

// Expect is what the commit marker (ferry-backup.json) says about the
// archive. Zero fields are not checked.
type Expect struct {
	Size           int64
	SHA256         string
	ManifestSHA256 string
	// AllowNoManifest accepts archives without ferry/manifest.json (Velero's).
	AllowNoManifest bool
}

// Item is one verified item: its manifest entry and its JSON bytes.
type Item struct {
	Entry
	Data []byte
}

// Archive is a fully read and verified archive.
type Archive struct {
	Version  string
	Manifest *Manifest
	Items    []Item
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

// Read reads a whole archive from r and verifies it before returning
// anything: the size and SHA-256 of the tar.gz against exp, the manifest
// against exp.ManifestSHA256, and every entry against its manifest SHA-256.
// Entries missing from the archive or not listed in the manifest are
// errors. name (the store key) is used in error messages. Every
// verification error wraps ErrCorrupt.
func Read(r io.Reader, name string, exp Expect) (*Archive, error) {
	hr := &hashCounter{r: r, h: sha256.New()}
	a, perr := readTar(hr, name, exp)
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

func readTar(r io.Reader, name string, exp Expect) (*Archive, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("archive %s: %s: %w", name, fmt.Sprintf(format, args...), ErrCorrupt)
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, corrupt("not a gzip stream (%v)", err)
	}
	tr := tar.NewReader(gz)
	a := &Archive{}
	digests := map[string]string{}
	data := map[string][]byte{}
	var manifestData []byte
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, corrupt("truncated or damaged after %d entries (%v)", len(data), err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if hdr.Size > MaxEntrySize || hdr.Size < 0 {
			return nil, corrupt("entry %s is %d bytes, more than the %d allowed", hdr.Name, hdr.Size, MaxEntrySize)
		}
		b, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil || int64(len(b)) != hdr.Size {
			return nil, corrupt("entry %s is truncated (%v)", hdr.Name, err)
		}
		switch {
		case hdr.Name == VersionPath:
			a.Version = strings.TrimSpace(string(b))
		case hdr.Name == ManifestPath:
			manifestData = b
		case strings.HasPrefix(hdr.Name, "resources/"):
			if _, dup := data[hdr.Name]; dup {
				return nil, corrupt("entry %s appears twice", hdr.Name)
			}
			s := sha256.Sum256(b)
			digests[hdr.Name] = hex.EncodeToString(s[:])
			data[hdr.Name] = b
		}
	}
	// A gzip stream must end cleanly; io.EOF from tar does not prove it.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return nil, corrupt("damaged gzip trailer (%v)", err)
	}
	if a.Version == "" {
		return nil, corrupt("no %s entry", VersionPath)
	}
	if manifestData == nil {
		if !exp.AllowNoManifest {
			return nil, corrupt("no %s: the archive is incomplete", ManifestPath)
		}
		return withoutManifest(a, data)
	}
	if exp.ManifestSHA256 != "" {
		s := sha256.Sum256(manifestData)
		if got := hex.EncodeToString(s[:]); got != exp.ManifestSHA256 {
			return nil, corrupt("%s has SHA-256 %s, the backup's commit says %s", ManifestPath, got, exp.ManifestSHA256)
		}
	}
	m, err := ParseManifest(manifestData)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w: %w", name, err, ErrCorrupt)
	}
	a.Manifest = m
	for _, e := range m.Entries {
		got, ok := digests[e.Path]
		if !ok {
			return nil, corrupt("entry %s is listed in the manifest but missing", e.Path)
		}
		if got != e.SHA256 {
			return nil, corrupt("entry %s has SHA-256 %s, the manifest says %s", e.Path, got, e.SHA256)
		}
		if int64(len(data[e.Path])) != e.Size {
			return nil, corrupt("entry %s is %d bytes, the manifest says %d", e.Path, len(data[e.Path]), e.Size)
		}
		a.Items = append(a.Items, Item{Entry: e, Data: data[e.Path]})
		delete(data, e.Path)
	}
	if len(data) > 0 {
		extra := make([]string, 0, len(data))
		for p := range data {
			extra = append(extra, p)
		}
		sort.Strings(extra)
		return nil, corrupt("entry %s is not listed in the manifest (%d such entries)", extra[0], len(extra))
	}
	return a, nil
}

// withoutManifest builds items from paths alone (Velero archives).
func withoutManifest(a *Archive, data map[string][]byte) (*Archive, error) {
	paths := make([]string, 0, len(data))
	for p := range data {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		gr, version, ns, name, ok := ParseItemPath(p)
		if !ok {
			continue
		}
		resource, group, _ := strings.Cut(gr, ".")
		s := sha256.Sum256(data[p])
		a.Items = append(a.Items, Item{Entry: Entry{Path: p, Group: group, Resource: resource, Version: strings.TrimSuffix(version, "-preferredversion"),
			Namespace: ns, Name: name, Size: int64(len(data[p])), SHA256: hex.EncodeToString(s[:])}, Data: data[p]})
	}
	return a, nil
}
