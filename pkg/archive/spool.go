package archive

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Item is one verified item: its manifest entry and where its JSON bytes
// are (Entry.Size bytes at an offset of the archive's spool file, or in
// memory for NewItem). Read returns them; an Item holds no item bytes.
type Item struct {
	Entry
	src io.ReaderAt
	off int64
}

// NewItem returns an item whose bytes are data, held in memory (for
// items that do not come from an archive, as in tests). e.Size is set.
func NewItem(e Entry, data []byte) Item {
	e.Size = int64(len(data))
	return Item{Entry: e, src: bytes.NewReader(data)}
}

// ErrNoData is wrapped by Item.Read for an item read by Verify, which
// keeps no item bytes.
var ErrNoData = errors.New("the item's bytes were not kept")

// Read returns a new copy of the item's JSON bytes, read from the spool:
// the caller may keep or drop it; nothing else holds it.
func (it Item) Read() ([]byte, error) {
	if it.src == nil {
		return nil, fmt.Errorf("archive entry %s: %w", it.Path, ErrNoData)
	}
	b := make([]byte, it.Size)
	n, err := it.src.ReadAt(b, it.off)
	if n == len(b) {
		return b, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("archive entry %s: reading it from the spool file: %w", it.Path, err)
}

// spool is the local file that holds a verified archive's item bytes, one
// after another, while a restore reads them (docs/design.md#the-archive-format).
// It is unlinked as soon as it is created where the system allows it
// (Linux does), so it goes with the process however that ends; Close
// removes it otherwise.
type spool struct {
	f       *os.File
	w       *bufio.Writer
	n       int64
	name    string
	removed bool
}

func newSpool() (*spool, error) {
	f, err := os.CreateTemp("", "ferry-archive-*.spool")
	if err != nil {
		return nil, fmt.Errorf("creating the archive's spool file: %w", err)
	}
	s := &spool{f: f, w: bufio.NewWriterSize(f, 256<<10), name: f.Name()}
	s.removed = os.Remove(s.name) == nil
	return s, nil
}

// spoolError is a failure to write the spool: a local error (a full
// disk), not a damaged archive.
type spoolError struct{ err error }

func (e *spoolError) Error() string {
	return fmt.Sprintf("writing the archive's spool file (in %s, $TMPDIR): %v", os.TempDir(), e.err)
}

func (e *spoolError) Unwrap() error { return e.err }

// Write appends p; it is the spool's io.Writer.
func (s *spool) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err != nil {
		return n, &spoolError{err}
	}
	return n, nil
}

// flush writes what is buffered, so that ReadAt sees every byte written.
func (s *spool) flush() error {
	if err := s.w.Flush(); err != nil {
		return &spoolError{err}
	}
	return nil
}

// ReadAt reads the spool (safe for concurrent use once flushed).
func (s *spool) ReadAt(p []byte, off int64) (int, error) { return s.f.ReadAt(p, off) }

// Close closes and removes the spool file.
func (s *spool) Close() error {
	err := s.f.Close()
	if !s.removed {
		if rerr := os.Remove(s.name); rerr != nil && err == nil && !errors.Is(rerr, os.ErrNotExist) {
			err = rerr
		}
		s.removed = true
	}
	return err
}
