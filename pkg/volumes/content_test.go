package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func write(t *testing.T, dir, rel, data string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The restore's list of what it wrote, and a later check against it:
// equal, then each kind of change named by path.
func TestContentCheck(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write(t, dir, "db/table.dat", "rows")
	write(t, dir, "db/with space\tand tab", "x")
	write(t, dir, "db.txt", "")
	write(t, dir, "conf", "a=1")
	if err := os.Symlink("db/table.dat", filepath.Join(dir, "current")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, ".ferry/restore-uid", "k1\n") // a done-marker: not content
	wrote, err := RecordContent(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if wrote.Files != 4 || wrote.Bytes != 8 {
		t.Errorf("recorded %+v, want 4 files, 8 bytes (the marker folder left out)", wrote)
	}
	var progressed int64
	got, err := CheckContent(ctx, dir, func(b, f int64) { progressed = b })
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != wrote.Digest || len(got.Changed) != 0 || got.NoList || progressed != 8 {
		t.Fatalf("unchanged volume: %+v (progress %d), want digest %s and nothing changed", got, progressed, wrote.Digest)
	}
	write(t, dir, ".ferry/another", "k2\n")
	if got, _ := CheckContent(ctx, dir, nil); got.Digest != wrote.Digest {
		t.Errorf("a new marker changed the content digest")
	}
	write(t, dir, "db/table.dat", "ROWS") // same size, other bytes
	write(t, dir, "db/new", "")
	write(t, dir, "zz/deep/file", "z")
	if err := os.Remove(filepath.Join(dir, "conf")); err != nil {
		t.Fatal(err)
	}
	got, err = CheckContent(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`"conf" (removed)`, `"db/new" (added)`, `"db/table.dat" (changed)`, `"zz" (added)`, `"zz/deep" (added)`, `"zz/deep/file" (added)`}
	if got.Digest == wrote.Digest || !reflect.DeepEqual(got.Changed, want) {
		t.Errorf("changed volume: digest %s (was %s), changed %q, want %q", got.Digest, wrote.Digest, got.Changed, want)
	}
	// A list the application replaced by a symlink is not followed.
	list := filepath.Join(dir, ".ferry", contentList)
	if err := os.Remove(list); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", list); err != nil {
		t.Fatal(err)
	}
	if got, err := CheckContent(ctx, dir, nil); err != nil || !got.NoList || len(got.Changed) != 0 {
		t.Errorf("with the list a symlink: %+v, %v; want NoList", got, err)
	}
}

// At most maxChangedPaths paths are named, then "...".
func TestChangedPathsCapped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write(t, dir, ".ferry/restore-uid", "k1\n")
	if _, err := RecordContent(ctx, dir); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 15; i++ {
		write(t, dir, fmt.Sprintf("f%02d", i), "x")
	}
	got, err := CheckContent(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Changed) != maxChangedPaths+1 || got.Changed[maxChangedPaths] != "..." || got.Changed[0] != `"f00" (added)` {
		t.Errorf("got %q, want %d paths and ...", got.Changed, maxChangedPaths)
	}
}

func TestWalkBefore(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"a", "a/b", true}, {"a/b", "a.txt", true}, {"a.txt", "a/b", false}, {"a/b", "a/c", true}, {"b", "a/z", false}} {
		if got := walkBefore(c.a, c.b); got != c.want {
			t.Errorf("walkBefore(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

// TestWalkSkipsVanishedEntries: a running application deletes files while
// a check walks its claim (a temporary file, a rotated log): an entry
// listed and gone before it is read is left out, not a failure of the
// walk.
func TestWalkSkipsVanishedEntries(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"gone", "link"} {
		p := filepath.Join(dir, n)
		if n == "link" {
			if err := os.Symlink("gone", p); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
		c := &Content{}
		line, err := entryLine(filepath.Join(dir, e.Name()), e.Name(), e, c, nil)
		if err != nil || line != "" || c.Files != 0 {
			t.Errorf("%s vanished before it was read: line %q, files %d, error %v; want it left out", e.Name(), line, c.Files, err)
		}
	}
}
