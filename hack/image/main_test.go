package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplaceableLayout: -oci-layout replaces only a missing or empty
// folder or an OCI image layout (it once removed any folder given).
func TestReplaceableLayout(t *testing.T) {
	dir := t.TempDir()
	if err := replaceableLayout(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("missing folder: %v", err)
	}
	if err := replaceableLayout(dir); err != nil {
		t.Errorf("empty folder: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := replaceableLayout(dir); err == nil || !strings.Contains(err.Error(), "not an OCI image layout") {
		t.Errorf("a folder of other files: %v, want a refusal", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := replaceableLayout(dir); err != nil {
		t.Errorf("an OCI layout: %v", err)
	}
}
