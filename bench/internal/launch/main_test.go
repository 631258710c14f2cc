package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestRun(t *testing.T) {
	usage := filepath.Join(t.TempDir(), "usage.json")
	if code := run([]string{"-usage", usage, "--", "sh", "-c", "exit 3"}); code != 3 {
		t.Errorf("exit code %d, want the command's 3", code)
	}
	data, err := os.ReadFile(usage)
	if err != nil {
		t.Fatal(err)
	}
	var u Usage
	if err := json.Unmarshal(data, &u); err != nil {
		t.Fatal(err)
	}
	if u.Code != 3 || u.Seconds <= 0 || u.MaxRSSMiB <= 0 {
		t.Errorf("usage %+v, want code 3, a time and a peak RSS", u)
	}
	if code := run([]string{"-usage", usage, "--", filepath.Join(t.TempDir(), "missing")}); code != 1 {
		t.Errorf("a command that cannot start: exit code %d, want 1", code)
	}
	if code := run([]string{"-usage", usage}); code != 2 {
		t.Errorf("no command: exit code %d, want 2", code)
	}
}
