package store

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSubURL(t *testing.T) {
	for _, c := range []struct{ in, sub, want, err string }{
		{"s3://b?endpoint=http%3A%2F%2Fh%3A9000&region=r", "preflight-probes/ab/", "s3://b?endpoint=http%3A%2F%2Fh%3A9000&prefix=preflight-probes%2Fab%2F&region=r", ""},
		{"gs://b?prefix=team%2F", "preflight-probes/ab/", "gs://b?prefix=team%2Fpreflight-probes%2Fab%2F", ""},
		{"s3://b", "../x/", "", "a relative path ending in /"},
		{"s3://b", "/x/", "", "a relative path ending in /"},
		{"s3://b", "x", "", "a relative path ending in /"},
		{"not a url", "x/", "", "not a URL"},
	} {
		got, err := SubURL(c.in, c.sub)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("SubURL(%q, %q): error %v, want one saying %q", c.in, c.sub, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("SubURL(%q, %q) = %q, %v; want %q", c.in, c.sub, got, err, c.want)
		}
	}
}

// A location opened at a SubURL writes under the prefix of the other,
// and DeleteUnder removes exactly that.
func TestSubURLLocation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc, err := Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	if err := loc.PutJSON(ctx, "backups/keep/x.json", 1); err != nil {
		t.Fatal(err)
	}
	u, err := SubURL("file://"+dir, ProbeDir+"p1/")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.PutJSON(ctx, "volumes/a", 2); err != nil {
		t.Fatal(err)
	}
	keys, _ := loc.Keys(ctx, "")
	if !slices.Equal(keys, []string{"backups/keep/x.json", ProbeDir + "p1/volumes/a"}) {
		t.Fatalf("keys %v", keys)
	}
	if err := loc.DeleteUnder(ctx, ProbeDir+"p1/"); err != nil {
		t.Fatal(err)
	}
	if keys, _ = loc.Keys(ctx, ""); !slices.Equal(keys, []string{"backups/keep/x.json"}) {
		t.Fatalf("after DeleteUnder: keys %v", keys)
	}
}

// SweepProbes deletes the probes a killed check left (their newest
// object over the age), and keeps a live one's and everything else.
func TestSweepProbes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc, err := Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	for _, k := range []string{ProbeDir + "old/volumes/a", ProbeDir + "old/volumes/b", ProbeDir + "new/volumes/a", "backups/keep/x.json"} {
		if err := loc.PutJSON(ctx, k, 1); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	for _, k := range []string{ProbeDir + "old/volumes/a", ProbeDir + "old/volumes/b"} {
		if err := os.Chtimes(filepath.Join(dir, k), past, past); err != nil {
			t.Fatal(err)
		}
	}
	n, err := loc.SweepProbes(ctx, time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("SweepProbes: %d, %v; want the 2 old objects", n, err)
	}
	keys, _ := loc.Keys(ctx, "")
	if !slices.Equal(keys, []string{"backups/keep/x.json", ProbeDir + "new/volumes/a"}) {
		t.Fatalf("keys left %v", keys)
	}
}
