package benchutil

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// MakeDataSet writes the volume benchmarks' mixed data set of about size
// bytes into dir: half in one disk image, a quarter in 24 medium files, a
// quarter in small files (1-40 KiB) in 200 folders, all random
// (incompressible) bytes from a fixed seed. Every folder gets the
// modification time of the newest entry below it (see newestTimes). It
// returns the bytes and files written.
func MakeDataSet(dir string, size int64) (int64, int, error) {
	rng := rand.New(rand.NewPCG(42, 4242))
	var total int64
	files := 0
	buf := make([]byte, 1<<20)
	write := func(p string, n int64) error {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		for left := n; left > 0; {
			c := min(left, int64(len(buf)))
			for i := 0; i+8 <= int(c); i += 8 {
				v := rng.Uint64()
				buf[i], buf[i+1], buf[i+2], buf[i+3], buf[i+4], buf[i+5], buf[i+6], buf[i+7] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
			}
			if _, err := f.Write(buf[:c]); err != nil {
				f.Close()
				return err
			}
			left -= c
		}
		total += n
		files++
		return f.Close()
	}
	if err := write(filepath.Join(dir, "disk", "disk.img"), size/2); err != nil {
		return 0, 0, err
	}
	for i := 0; i < 24; i++ {
		if err := write(filepath.Join(dir, "media", fmt.Sprintf("clip-%02d.bin", i)), size/4/24); err != nil {
			return 0, 0, err
		}
	}
	for i := 0; total < size; i++ {
		if err := write(filepath.Join(dir, "small", fmt.Sprintf("%03d", i%200), fmt.Sprintf("f%06d.dat", i)), int64(1024+rng.IntN(40*1024))); err != nil {
			return 0, 0, err
		}
	}
	return total, files, newestTimes(dir)
}

// newestTimes gives every folder under dir, and dir, the modification time
// of the newest entry below it: the time the kopia CLI restores a folder
// with (kopia's snapshotfs reports DirSummary.MaxModTime), while ferry
// restores each folder's own recorded time; where the two agree, both
// tools' restores can be checked strictly.
func newestTimes(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	// WalkDir lists a folder before its subfolders: go backwards, so that
	// each subfolder has its time before its parent's is computed.
	for i := len(dirs) - 1; i >= 0; i-- {
		entries, err := os.ReadDir(dirs[i])
		if err != nil {
			return err
		}
		var newest time.Time
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				return err
			}
			if t := info.ModTime(); t.After(newest) {
				newest = t
			}
		}
		if newest.IsZero() {
			continue
		}
		if err := os.Chtimes(dirs[i], newest, newest); err != nil {
			return err
		}
	}
	return nil
}
