package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCheckReportDir: the folders a run made for its report are removed
// when it ends without writing one, and kept (with what exists) otherwise.
func TestCheckReportDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "c")
	removeEmpty, err := checkReportDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("report folder not made: %v", err)
	}
	removeEmpty()
	if _, err := os.Stat(filepath.Join(root, "a")); !os.IsNotExist(err) {
		t.Errorf("empty folders left after a run that wrote no report: %v", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Errorf("a folder that existed before was removed: %v", err)
	}

	removeEmpty, err = checkReportDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.html"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	removeEmpty()
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Errorf("the report was removed: %v", err)
	}
}

// TestDefaultReportDir: without --report-dir, reports go under ferry's
// state folder, never into the current folder (issue 28).
func TestDefaultReportDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if got := defaultReportDir("m1"); got != "/x/state/ferry/reports/m1" {
		t.Errorf("with XDG_STATE_HOME: %s", got)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := defaultReportDir("m1"); got != "/home/u/.local/state/ferry/reports/m1" {
		t.Errorf("without XDG_STATE_HOME: %s", got)
	}
}
