// Package volumetest builds volume contents for tests and compares two
// directory trees byte for byte, with modes, modification times and
// symlink targets.
package volumetest

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// TreeOptions size a test tree.
type TreeOptions struct {
	// BigFile is the size of big.bin in bytes (0: none).
	BigFile int64
	// SmallFiles is the number of small files under many/ (spread over
	// 100 folders), each 100-4,000 bytes.
	SmallFiles int
	// Marker is written into some files; search the store for it.
	Marker string
	// Seed makes the content reproducible.
	Seed uint64
}

// baseTime is the modification time of the tree's entries (plus offsets).
var baseTime = time.Date(2024, 2, 29, 12, 34, 56, 789000000, time.UTC)

// MakeTree fills dir with: nested directories (a/b/c/d), big.bin, many
// small files, symlinks (relative, absolute and dangling), empty files, a
// sparse file (holes of 8 MiB around data), files with modes 0600, 0755
// and 0444 and a directory with mode 0700, set modification times, and a
// file name with non-ASCII characters. It returns the number of regular
// files written.
func MakeTree(dir string, o TreeOptions) (int, error) {
	t := &tree{dir: dir, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))}
	for _, f := range []struct {
		rel  string
		data []byte
		mode os.FileMode
	}{
		{"a/b/c/d/deep.txt", []byte("deep file\n" + o.Marker + "\n"), 0o644},
		{"secret/marker.txt", []byte(o.Marker + " " + o.Marker + "\n"), 0o600},
		{"bin/tool.sh", []byte("#!/bin/sh\necho hi\n"), 0o755},
		{"readonly.txt", []byte("read only\n"), 0o444},
		{"empty", nil, 0o644},
		{"a/empty-too", nil, 0o600},
		{"données/日本語-ファイル-ñ.txt", []byte("non-ASCII name\n"), 0o644},
	} {
		if err := t.write(f.rel, f.data, f.mode); err != nil {
			return 0, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty-dir"), 0o755); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "private"), 0o700); err != nil {
		return 0, err
	}
	if err := t.write("private/key", t.random(300), 0o600); err != nil {
		return 0, err
	}
	if err := t.sparse("sparse.img"); err != nil {
		return 0, err
	}
	if o.BigFile > 0 {
		if err := t.big("big.bin", o.BigFile); err != nil {
			return 0, err
		}
	}
	for i := 0; i < o.SmallFiles; i++ {
		if err := t.write(fmt.Sprintf("many/%02d/f%05d.dat", i%100, i), t.random(100+t.rng.IntN(3900)), 0o644); err != nil {
			return 0, err
		}
	}
	for name, target := range map[string]string{"link-rel": "a/b/c/d/deep.txt", "a/link-up": "../readonly.txt", "link-abs": "/etc/hostname", "link-dangling": "does/not/exist"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return 0, err
		}
	}
	if err := setTimes(dir); err != nil {
		return 0, err
	}
	return t.files, nil
}

// tree is a tree MakeTree is writing: its folder, the random source of
// its content, and the number of regular files written so far.
type tree struct {
	dir   string
	rng   *rand.Rand
	files int
}

// write writes the regular file rel with data and mode.
func (t *tree) write(rel string, data []byte, mode os.FileMode) error {
	p := filepath.Join(t.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return err
	}
	t.files++
	return os.Chmod(p, mode)
}

// random returns n random bytes.
func (t *tree) random(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(t.rng.Uint32())
	}
	return b
}

// sparse writes rel as a sparse file: 8 MiB hole, 64 KiB data, 8 MiB
// hole, 1 byte.
func (t *tree) sparse(rel string) error {
	f, err := os.Create(filepath.Join(t.dir, rel))
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(t.random(64<<10), 8<<20); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte{1}, 16<<20+64<<10); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	t.files++
	return nil
}

// big writes rel with size random bytes, a MiB at a time.
func (t *tree) big(rel string, size int64) error {
	bf, err := os.Create(filepath.Join(t.dir, rel))
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		for i := 0; i < int(n); i += 8 {
			v := t.rng.Uint64()
			for j := 0; j < 8 && i+j < int(n); j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := bf.Write(buf[:n]); err != nil {
			return err
		}
		left -= n
	}
	if err := bf.Close(); err != nil {
		return err
	}
	t.files++
	return nil
}

// setTimes sets the modification times of the entries of dir, bottom-up
// so that setting a file's time does not change its directory's
// afterwards. Symlinks keep theirs: Go cannot set a symlink's own times
// portably.
func setTimes(dir string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(paths) - 1; i >= 0; i-- {
		t := baseTime.Add(time.Duration(i) * time.Second)
		st, err := os.Lstat(paths[i])
		if err != nil {
			return err
		}
		if st.Mode()&os.ModeSymlink != 0 {
			continue
		}
		if err := os.Chtimes(paths[i], t, t); err != nil {
			return err
		}
	}
	return nil
}

// entry is what Compare checks of one path.
type entry struct {
	mode   os.FileMode
	size   int64
	mtime  time.Time
	link   string
	digest [32]byte
}

// Snapshot records every entry under dir except the top-level names in skip.
func Snapshot(dir string, skip ...string) (map[string]entry, error) {
	out := map[string]entry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		for _, s := range skip {
			if rel == s {
				return filepath.SkipDir
			}
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{mode: st.Mode(), size: st.Size()}
		if st.Mode()&os.ModeSymlink == 0 {
			e.mtime = st.ModTime()
		}
		switch {
		case st.Mode()&os.ModeSymlink != 0:
			e.link, err = os.Readlink(p)
		case st.Mode().IsRegular():
			e.digest, err = digest(p)
		case st.IsDir():
			e.size = 0
		}
		if err != nil {
			return err
		}
		out[rel] = e
		return nil
	})
	return out, err
}

func digest(p string) ([32]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return [32]byte{}, err
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d, nil
}

// Compare returns the differences between the trees at want and got
// (content, mode, size, mtime, symlink target, presence), at most 20,
// ignoring the top-level names in skip in both.
func Compare(want, got string, skip ...string) ([]string, error) {
	w, err := Snapshot(want, skip...)
	if err != nil {
		return nil, err
	}
	g, err := Snapshot(got, skip...)
	if err != nil {
		return nil, err
	}
	var diffs []string
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := w[k]
		b, ok := g[k]
		switch {
		case !ok:
			diffs = append(diffs, k+": missing")
		case a.mode != b.mode:
			diffs = append(diffs, fmt.Sprintf("%s: mode %v, want %v", k, b.mode, a.mode))
		case a.size != b.size:
			diffs = append(diffs, fmt.Sprintf("%s: size %d, want %d", k, b.size, a.size))
		case !a.mtime.Equal(b.mtime):
			diffs = append(diffs, fmt.Sprintf("%s: mtime %v, want %v", k, b.mtime, a.mtime))
		case a.link != b.link:
			diffs = append(diffs, fmt.Sprintf("%s: symlink to %q, want %q", k, b.link, a.link))
		case !bytes.Equal(a.digest[:], b.digest[:]):
			diffs = append(diffs, k+": content differs")
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			diffs = append(diffs, k+": not in the source")
		}
	}
	if len(diffs) > 20 {
		diffs = append(diffs[:20], fmt.Sprintf("... and %d more", len(diffs)-20))
	}
	return diffs, nil
}

// Blocks returns the 512-byte blocks allocated to path (to check sparseness).
func Blocks(path string) (int64, error) {
	return blocks(path)
}
