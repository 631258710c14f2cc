package e2e

import (
	"strings"
	"testing"
)

// TestFlagRefusals: flags that would do nothing in a combination are
// refused with the reason before anything connects anywhere, rather than
// silently ignored.
func TestFlagRefusals(t *testing.T) {
	store := "file://" + t.TempDir()
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
	} {
		r := ferry(t, nil, append(c.args, "--storage", store, "--kubeconfig", "/nonexistent")...)
		if r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("ferry %s: exit %d, stderr %q; want %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}
