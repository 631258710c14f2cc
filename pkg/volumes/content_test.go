package volumes

import (
	"context"
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
	write(t, dir, "conf", "a=1")
	if err := os.Symlink("db/table.dat", filepath.Join(dir, "current")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, ".ferry/restore-uid", "k1\n") // a done-marker: not content
	wrote, err := recordContent(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if wrote.Files != 3 || wrote.Bytes != 8 {
		t.Errorf("recorded %+v, want 3 files, 8 bytes (the marker folder left out)", wrote)
	}
	got, err := CheckContent(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != wrote.Digest || len(got.Changed) != 0 || got.NoList {
		t.Fatalf("unchanged volume: %+v, want digest %s and nothing changed", got, wrote.Digest)
	}
	write(t, dir, ".ferry/another", "k2\n")
	if got, _ := CheckContent(ctx, dir); got.Digest != wrote.Digest {
		t.Errorf("a new marker changed the content digest")
	}
	write(t, dir, "db/table.dat", "ROWS") // same size, other bytes
	write(t, dir, "db/new", "")
	if err := os.Remove(filepath.Join(dir, "conf")); err != nil {
		t.Fatal(err)
	}
	got, err = CheckContent(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"conf (removed)", "db/new (added)", "db/table.dat (changed)"}
	if got.Digest == wrote.Digest || !reflect.DeepEqual(got.Changed, want) {
		t.Errorf("changed volume: digest %s (was %s), changed %q, want %q", got.Digest, wrote.Digest, got.Changed, want)
	}
	if err := os.Remove(filepath.Join(dir, ".ferry", contentList)); err != nil {
		t.Fatal(err)
	}
	if got, _ := CheckContent(ctx, dir); !got.NoList || len(got.Changed) != 0 {
		t.Errorf("without the list: %+v, want NoList", got)
	}
}

func TestChangedPathsCapped(t *testing.T) {
	var was, now []string
	for i := 0; i < 15; i++ {
		now = append(now, "d\t\"dir"+string(rune('a'+i))+"\"")
	}
	got := changedPaths(was, now, 10)
	if len(got) != 11 || got[10] != "..." || got[0] != "dira (added)" {
		t.Errorf("got %q, want 10 paths and ...", got)
	}
}
