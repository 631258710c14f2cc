package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagRefusals: flags that would do nothing in a combination are
// refused with the reason before anything connects anywhere, rather than
// silently ignored.
func TestFlagRefusals(t *testing.T) {
	store := "file://" + t.TempDir()
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "create", "b", "--platform", "linux/amd64"}, "with --images=record nothing is copied"},
		{[]string{"backup", "create", "b", "--images", "none", "--platform", "linux/amd64"}, "with --images=none nothing is copied"},
		{[]string{"restore", "create", "--from-backup", "b", "--platform", "linux/amd64"}, "a restore pushes the platforms its backup kept"},
		{[]string{"node-agent", "--server", "--host-pods-dir", t.TempDir(), "--once"}, "--once is for the polling node agent"},
		{[]string{"node-agent", "--host-pods-dir", t.TempDir(), "--probe-addr", ":0"}, "--probe-addr is for --server"},
		{[]string{"schedule", "create", "s", "--schedule", "@hourly", "--ttl", "-1h"}, "--ttl -1h0m0s is negative"},
		// Found by a new-user run: these were accepted, or their error
		// hidden behind the missing kubeconfig.
		{[]string{"schedule", "create", "s", "--schedule", "@every 0s"}, "runs must be at least 1m0s apart"},
		{[]string{"install", "-n", ""}, `--namespace "": a lowercase RFC 1123 label`},
		{[]string{"install", "--image", ""}, "--image is empty"},
		{[]string{"install", "--location-url", "s3://b", "--credentials-file", empty}, "no KEY=VALUE lines"},
		{[]string{"backup", "create", "b", "--server", "--ttl", "-5m"}, "--ttl -5m0s is negative"},
		{[]string{"restore", "create", "--from-backup", "b", "--server", "--encryption-identity-secret", ":key"}, "want NAME[:KEY]"},
	} {
		args := append(c.args, "--kubeconfig", "/nonexistent")
		if !strings.Contains(strings.Join(c.args, " "), "--server") {
			args = append(args, "--storage", store) // refused with --server
		}
		r := ferry(t, nil, args...)
		if r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("ferry %s: exit %d, stderr %q; want %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}
