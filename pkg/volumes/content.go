package volumes

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// Content is what a volume holds, outside ferry's marker folder: its
// regular files, their bytes, and a digest of the whole tree: sha256 over
// one line per entry, in the order a walk visits them (each directory's
// entries sorted by name, the same on every walk): "d", "l" or "f", the
// quoted path, then a symlink's quoted target or a file's size and
// sha256, tab-separated. Modes, owners and times are not in it: an
// application that only touches a file leaves its content equal.
type Content struct {
	Files  int64  `json:"files"`
	Bytes  int64  `json:"bytes"`
	Digest string `json:"digest"`
}

// SnapshotSummary is what the snapshot a volume was restored from holds,
// from its manifest: its ID, root object, regular files and bytes.
type SnapshotSummary struct {
	ID         string `json:"id"`
	RootObject string `json:"rootObject"`
	Files      int64  `json:"files"`
	Bytes      int64  `json:"bytes"`
}

// ContentCheck is what a check of a restored volume found (helper op
// "check"): its content now, and, when the restore's list of entries was
// in the volume, the first paths that differ from it.
type ContentCheck struct {
	Content
	// Changed names the first paths (quoted) that were added, removed or
	// changed since the restore wrote its list, at most maxChangedPaths.
	Changed []string `json:"changed,omitempty"`
	// NoList is set when the restore's list was not in the volume (or not
	// readable): the digests are compared, but no path can be named.
	NoList bool `json:"noList,omitempty"`
}

// contentList is the file in a restored volume's marker folder that lists
// the entries the restore wrote, one line each, as Content digests them
// (hidden: it is not a done-marker).
const contentList = ".content"

const (
	maxChangedPaths = 10
	maxLine         = 1 << 20 // a list line: a path and a symlink target
)

// WalkContent walks the volume at dir (its marker folder left out), calls
// each (if set) with every entry's line in walk order, and reports the
// bytes and files read so far to progress. Nothing of the walk is kept in
// memory: a volume of millions of files costs no more than one of ten.
func WalkContent(ctx context.Context, dir string, progress Progress, each func(line string) error) (*Content, error) {
	return walkContent(ctx, dir, progress, nil, each)
}

// reuseHash, if set, gives the content hash of regular file rel (slash
// path) of size bytes without reading it, when it is known unchanged.
type reuseHash func(rel string, size int64) (string, bool)

func walkContent(ctx context.Context, dir string, progress Progress, reuse reuseHash, each func(line string) error) (*Content, error) {
	c := &Content{}
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil && p != dir && errors.Is(err, fs.ErrNotExist) {
			return nil // removed by a running application while walked
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if rel == v1alpha1.DoneMarkerDir && d.IsDir() {
			return filepath.SkipDir
		}
		line, err := entryLine(p, rel, d, c, reuse)
		if err != nil || line == "" {
			return err
		}
		_, _ = io.WriteString(h, line+"\n")
		if progress != nil && d.Type().IsRegular() {
			progress(c.Bytes, c.Files)
		}
		if each != nil {
			return each(line)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the volume at %s: %w", dir, err)
	}
	c.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return c, nil
}

// entryLine is the line of one entry (path rel, at p), counting a regular
// file in c; sockets, devices and pipes hold no data and are left out, and
// so is an entry a running application removed between the listing and
// the read (a check after the workloads started walks a live claim).
func entryLine(p, rel string, d fs.DirEntry, c *Content, reuse reuseHash) (string, error) {
	line, err := readEntry(p, rel, d, c, reuse)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return line, err
}

func readEntry(p, rel string, d fs.DirEntry, c *Content, reuse reuseHash) (string, error) {
	slash := filepath.ToSlash(rel)
	rel = strconv.Quote(slash) // no tab or newline left in it
	switch {
	case d.IsDir():
		return "d\t" + rel, nil
	case d.Type()&fs.ModeSymlink != 0:
		t, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		return "l\t" + rel + "\t" + strconv.Quote(t), nil
	case d.Type().IsRegular():
		if reuse != nil {
			if fi, err := d.Info(); err == nil {
				if h, ok := reuse(slash, fi.Size()); ok {
					c.Files++
					c.Bytes += fi.Size()
					return fmt.Sprintf("f\t%s\t%d\t%s", rel, fi.Size(), h), nil
				}
			}
		}
		f, err := os.Open(p)
		if err != nil {
			return "", err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return "", err
		}
		c.Files++
		c.Bytes += n
		return fmt.Sprintf("f\t%s\t%d\t%s", rel, n, hex.EncodeToString(h.Sum(nil))), nil
	}
	return "", nil
}

// RecordContent walks the volume at dir and keeps the list of its
// entries in its marker folder (atomically), for a later CheckContent.
func RecordContent(ctx context.Context, dir string) (*Content, error) {
	return recordContent(ctx, dir, nil)
}

// recordContentAfterSync is RecordContent after a sync that wrote the
// files in written (slash paths): the others passed the sync's quick
// check against the snapshot, so their hashes are taken from the list the
// claim kept before (the list at listBefore, when it lists them at the same
// size) instead of reading them again: a cutover's final delta does not
// read the whole claim during the downtime.
func recordContentAfterSync(ctx context.Context, dir, listBefore string, written map[string]bool) (*Content, error) {
	f, err := openListAt(listBefore)
	if err != nil {
		return RecordContent(ctx, dir)
	}
	defer f.Close()
	was := bufio.NewScanner(f)
	was.Buffer(make([]byte, 64<<10), maxLine)
	m := &merge{was: was}
	return recordContent(ctx, dir, func(rel string, size int64) (string, bool) {
		if written[rel] {
			return "", false
		}
		e := m.peek()
		for ; e != nil && walkBefore(e.path, rel); e = m.peek() {
			m.pending = nil
		}
		if e == nil || e.path != rel {
			return "", false
		}
		cols := strings.Split(e.line, "\t")
		if len(cols) != 4 || cols[0] != "f" || cols[2] != strconv.FormatInt(size, 10) {
			return "", false
		}
		return cols[3], true
	})
}

func recordContent(ctx context.Context, dir string, reuse reuseHash) (*Content, error) {
	p := filepath.Join(dir, v1alpha1.DoneMarkerDir, contentList)
	tmp := p + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp) // after the rename, nothing is there
	w := bufio.NewWriter(f)
	c, err := walkContent(ctx, dir, nil, reuse, func(line string) error {
		_, err := w.WriteString(line + "\n")
		return err
	})
	if err = errors.Join(err, w.Flush(), f.Close()); err != nil {
		return nil, err
	}
	return c, os.Rename(tmp, p)
}

// CheckContent walks the restored volume at dir (read-only) and compares
// it, entry by entry, with the list the restore kept there, naming the
// first paths that differ. A list that is missing, not a regular file or
// unreadable leaves the paths unnamed (NoList); the digest still tells.
func CheckContent(ctx context.Context, dir string, progress Progress) (*ContentCheck, error) {
	out := &ContentCheck{}
	var was *bufio.Scanner
	if f, err := openList(dir); err == nil {
		defer f.Close()
		was = bufio.NewScanner(f)
		was.Buffer(make([]byte, 64<<10), maxLine)
	} else {
		out.NoList = true
	}
	m := &merge{was: was}
	c, err := WalkContent(ctx, dir, progress, func(line string) error { m.next(line); return nil })
	if err != nil {
		return nil, err
	}
	m.next("") // what is left of the list was removed
	out.Content, out.Changed = *c, m.changed
	if was != nil && was.Err() != nil {
		out.NoList, out.Changed = true, nil
	}
	return out, nil
}

// openList opens dir's list of restored entries: a regular file, not
// followed through a symlink (the application may have written there).
func openList(dir string) (*os.File, error) {
	return openListAt(filepath.Join(dir, v1alpha1.DoneMarkerDir, contentList))
}

func openListAt(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", contentList)
	}
	return f, nil
}

// merge compares the lines of a walk with the restore's list of the same
// walk, both in walk order, naming the paths that differ.
type merge struct {
	was     *bufio.Scanner
	pending *listEntry // the list's next line, read but not yet matched
	done    bool
	changed []string
}

type listEntry struct{ path, line string }

func parseLine(line string) listEntry {
	f := strings.SplitN(line, "\t", 3)
	if len(f) < 2 {
		return listEntry{line: line}
	}
	p, err := strconv.Unquote(f[1])
	if err != nil {
		p = f[1]
	}
	return listEntry{path: p, line: line}
}

// peek is the list's next entry, or nil at its end.
func (m *merge) peek() *listEntry {
	if m.pending == nil && !m.done && m.was != nil {
		if m.was.Scan() {
			e := parseLine(m.was.Text())
			m.pending = &e
		} else {
			m.done = true
		}
	}
	return m.pending
}

// next takes the walk's next line ("" at its end).
func (m *merge) next(line string) {
	if m.was == nil {
		return
	}
	now := parseLine(line)
	for e := m.peek(); e != nil && (line == "" || walkBefore(e.path, now.path)); e = m.peek() {
		m.note(e.path, "removed")
		m.pending = nil
	}
	if line == "" {
		return
	}
	if e := m.peek(); e != nil && e.path == now.path {
		if e.line != now.line {
			m.note(now.path, "changed")
		}
		m.pending = nil
		return
	}
	m.note(now.path, "added")
}

func (m *merge) note(path, what string) {
	switch {
	case len(m.changed) == maxChangedPaths:
		m.changed = append(m.changed, "...")
	case len(m.changed) < maxChangedPaths:
		if r := []rune(path); len(r) > 120 { // a report row, not the whole path
			path = string(r[:60]) + "..." + string(r[len(r)-60:])
		}
		m.changed = append(m.changed, fmt.Sprintf("%s (%s)", strconv.QuoteToASCII(path), what))
	}
}

// walkBefore says whether a walk visits path a before path b: component
// by component, each directory's entries sorted by name.
func walkBefore(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] != bs[i] {
			return as[i] < bs[i]
		}
	}
	return len(as) < len(bs)
}

// ClaimRef names a restored claim in the target.
type ClaimRef struct {
	Namespace string `json:"namespace"`
	Claim     string `json:"claim"`
}

// ClaimCheckResult is the check of one restored claim: what it holds now
// (Check), the pods that mount it writable at the time of the check
// (WrittenBy: an application that may have changed it since the restore),
// or why it could not be checked (Error).
type ClaimCheckResult struct {
	ClaimRef
	Check      *ContentCheck `json:"check,omitempty"`
	WrittenBy  []string      `json:"writtenBy,omitempty"`
	Error      string        `json:"error,omitempty"`
	HelperPod  string        `json:"helperPod,omitempty"`
	HelperNode string        `json:"helperNode,omitempty"`
}
