package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/klauspost/compress/gzip"
	"hash"
	"io"
	"sync"
	"time"
)

// Writer streams items into a tar.gz. It is safe for concurrent use; each
// item is written whole under a lock. Close writes the manifest last.
type Writer struct {
	mu      sync.Mutex
	out     *countingHash
	gz      *gzip.Writer
	tw      *tar.Writer
	entries []Entry
	seen    map[string]bool
	now     time.Time
	closed  bool
}

// Summary describes a finished archive: total size in bytes and SHA-256 of
// the tar.gz, the manifest's SHA-256, and the number of item entries.
type Summary struct {
	Size           int64
	SHA256         string
	ManifestSHA256 string
	Entries        int
}

type countingHash struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// NewWriter starts an archive on w and writes metadata/version.
func NewWriter(w io.Writer) (*Writer, error) {
	out := &countingHash{w: w, h: sha256.New()}
	gz, _ := gzip.NewWriterLevel(out, gzip.BestSpeed)
	aw := &Writer{out: out, gz: gz, tw: tar.NewWriter(gz), seen: map[string]bool{}, now: time.Now().UTC()}
	if err := aw.writeFile(VersionPath, []byte(FormatVersion+"\n")); err != nil {
		return nil, err
	}
	return aw, nil
}

func (w *Writer) writeFile(name string, data []byte) error {
	hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: w.now, Typeflag: tar.TypeReg}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive entry %s: %w", name, err)
	}
	if _, err := w.tw.Write(data); err != nil {
		return fmt.Errorf("archive entry %s: %w", name, err)
	}
	return nil
}

// WriteItem adds one API object (JSON) at its Velero-layout path and
// records it in the manifest. e's Path, Size and SHA256 are filled in.
// Writing the same path twice is an error.
func (w *Writer) WriteItem(e Entry, data []byte) error { return w.WriteItemAt(e, "", data) }

// WriteItemAt is WriteItem with a version directory: the object goes to
// resources/<gr>/<versionDir>/... (VersionedItemPath); "" is WriteItem.
func (w *Writer) WriteItemAt(e Entry, versionDir string, data []byte) error {
	// Hash before taking the lock, so concurrent writers hash in parallel.
	e.Path = VersionedItemPath(e.Group, e.Resource, versionDir, e.Namespace, e.Name)
	sum := sha256.Sum256(data)
	e.SHA256 = hex.EncodeToString(sum[:])
	e.Size = int64(len(data))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("archive entry %s: archive already closed", e.Path)
	}
	if w.seen[e.Path] {
		return fmt.Errorf("archive entry %s: written twice", e.Path)
	}
	w.seen[e.Path] = true
	if err := w.writeFile(e.Path, data); err != nil {
		return err
	}
	w.entries = append(w.entries, e)
	return nil
}

// Close writes ferry/manifest.json (m's Entries and FormatVersion are set
// here), ends the tar and gzip streams, and returns the archive summary.
// It does not close the underlying writer.
func (w *Writer) Close(m Manifest) (Summary, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return Summary{}, fmt.Errorf("archive already closed")
	}
	w.closed = true
	m.FormatVersion = FormatVersion
	if m.Created.IsZero() {
		m.Created = w.now
	}
	// The manifest is encoded twice, one entry at a time, rather than
	// held whole (73 MB at 200,000 objects): once for its size, which the
	// tar header needs first, and its digest; then into the archive.
	sized := &countingHash{w: io.Discard, h: sha256.New()}
	if err := encodeManifest(sized, m, w.entries); err != nil {
		return Summary{}, fmt.Errorf("encoding manifest: %w", err)
	}
	hdr := &tar.Header{Name: ManifestPath, Mode: 0o644, Size: sized.n, ModTime: w.now, Typeflag: tar.TypeReg}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return Summary{}, fmt.Errorf("archive entry %s: %w", ManifestPath, err)
	}
	if err := encodeManifest(w.tw, m, w.entries); err != nil {
		return Summary{}, fmt.Errorf("archive entry %s: %w", ManifestPath, err)
	}
	if err := w.tw.Close(); err != nil {
		return Summary{}, err
	}
	if err := w.gz.Close(); err != nil {
		return Summary{}, err
	}
	return Summary{
		Size:           w.out.n,
		SHA256:         hex.EncodeToString(w.out.h.Sum(nil)),
		ManifestSHA256: hex.EncodeToString(sized.h.Sum(nil)),
		Entries:        len(w.entries),
	}, nil
}

// encodeManifest writes m with entries as its entries, the same bytes as
// json.Marshal of the whole manifest, one entry at a time.
func encodeManifest(out io.Writer, m Manifest, entries []Entry) error {
	m.Entries = []Entry{}
	head, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// Entries is the last field: head ends in "entries":[]} .
	head = bytes.TrimSuffix(head, []byte("]}"))
	bw := bufio.NewWriterSize(out, 64<<10)
	bw.Write(head)
	for i, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.Write(b)
	}
	bw.WriteString("]}")
	return bw.Flush()
}
