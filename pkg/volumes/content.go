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
	"sort"
	"strconv"
	"strings"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// Content is what a volume holds, outside ferry's marker folder: its
// regular files, their bytes, and a digest of the whole tree: sha256 over
// one line per entry, sorted ("d", "l" or "f", the quoted path, then a
// symlink's quoted target, or a file's size and sha256, tab-separated). Modes, owners and times are not in
// it: an application that only touches a file leaves its content equal.
type Content struct {
	Files  int64  `json:"files"`
	Bytes  int64  `json:"bytes"`
	Digest string `json:"digest"`
}

// SnapshotSummary is what the snapshot a volume was restored from holds,
// from its manifest: its root object and its regular files and bytes.
type SnapshotSummary struct {
	ID         string `json:"id"`
	RootObject string `json:"rootObject"`
	Files      int64  `json:"files"`
	Bytes      int64  `json:"bytes"`
}

// ContentCheck is what a check of a restored volume found (helper Op
// "check"): its content now, and, when the restore's list of entries was
// in the volume, the first paths that differ from it.
type ContentCheck struct {
	Content
	// Changed names the first paths that were added, removed or changed
	// since the restore wrote its list (at most maxChangedPaths).
	Changed []string `json:"changed,omitempty"`
	// NoList is set when the restore's list was not in the volume: the
	// digests are compared, but no path can be named.
	NoList bool `json:"noList,omitempty"`
}

// contentList is the file in a restored volume's marker folder that lists
// the entries the restore wrote, one line each, as Content digests them
// (hidden: it is not a done-marker).
const contentList = ".content"

const maxChangedPaths = 10

// WalkContent walks the volume at dir (its marker folder left out) and
// returns its Content and the sorted entry lines it was digested from.
func WalkContent(ctx context.Context, dir string) (*Content, []string, error) {
	c := &Content{}
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
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
		line, err := entryLine(p, rel, d, c)
		if err != nil {
			return err
		}
		if line != "" {
			lines = append(lines, line)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the volume at %s: %w", dir, err)
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		_, _ = io.WriteString(h, l+"\n")
	}
	c.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return c, lines, nil
}

// entryLine is the line of one entry (path rel, at p), counting a regular
// file in c; sockets, devices and pipes hold no data and are left out.
func entryLine(p, rel string, d fs.DirEntry, c *Content) (string, error) {
	rel = strconv.Quote(filepath.ToSlash(rel)) // no tab or newline left in it
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

// writeContentList keeps lines in dir's marker folder (atomically).
func writeContentList(dir string, lines []string) error {
	p := filepath.Join(dir, v1alpha1.DoneMarkerDir, contentList)
	tmp := p + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, l := range lines {
		_, _ = w.WriteString(l + "\n")
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, p)
}

// CheckContent walks the restored volume at dir (read-only) and compares
// it with the list the restore kept there, naming what differs.
func CheckContent(ctx context.Context, dir string) (*ContentCheck, error) {
	c, lines, err := WalkContent(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := &ContentCheck{Content: *c}
	b, err := os.ReadFile(filepath.Join(dir, v1alpha1.DoneMarkerDir, contentList))
	if err != nil {
		out.NoList = true
		return out, nil
	}
	was := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	out.Changed = changedPaths(was, lines, maxChangedPaths)
	return out, nil
}

// changedPaths names up to max paths whose lines differ between the
// sorted lists was and now: "changed", "added" or "removed".
func changedPaths(was, now []string, max int) []string {
	index := func(lines []string) map[string]string {
		m := make(map[string]string, len(lines))
		for _, l := range lines {
			if f := strings.SplitN(l, "\t", 3); len(f) >= 2 {
				if p, err := strconv.Unquote(f[1]); err == nil {
					m[p] = l
				}
			}
		}
		return m
	}
	a, b := index(was), index(now)
	paths := map[string]bool{}
	for p := range a {
		paths[p] = true
	}
	for p := range b {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	var out []string
	for _, p := range sorted {
		var what string
		switch x, y := a[p], b[p]; {
		case x == "":
			what = p + " (added)"
		case y == "":
			what = p + " (removed)"
		case x != y:
			what = p + " (changed)"
		default:
			continue
		}
		if len(out) == max {
			return append(out, "...")
		}
		if len(what) > 200 { // the list travels in a termination message
			what = what[:200] + "..."
		}
		out = append(out, what)
	}
	return out
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
