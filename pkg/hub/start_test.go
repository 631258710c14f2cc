package hub_test

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeferry/ferry/pkg/hub"
)

// TestStartRefusals: a hub that cannot start says why, at once, with no
// panic, and leaves its data directory usable: a second hub on a data
// directory in use, a token file that does not exist, a port in use, an
// etcd that does not answer.
func TestStartRefusals(t *testing.T) {
	requireServers(t)
	dir := t.TempDir()
	h := startHub(t, hub.Options{DataDir: dir})
	lo := net.IPv4(127, 0, 0, 1)
	cases := []struct {
		name string
		o    hub.Options
		want string
	}{
		{"data dir in use", hub.Options{DataDir: dir, BindAddress: lo}, "is in use by another ferry hub"},
		{"missing token file", hub.Options{DataDir: t.TempDir(), BindAddress: lo, TokenAuthFiles: []string{filepath.Join(t.TempDir(), "none.csv")}}, "none.csv"},
		{"port in use", hub.Options{DataDir: t.TempDir(), BindAddress: lo, SecurePort: h.Port}, "address already in use"},
		{"etcd does not answer", hub.Options{DataDir: t.TempDir(), BindAddress: lo, EtcdServers: []string{"http://127.0.0.1:1"}}, "etcd servers http://127.0.0.1:1: no answer"},
	}
	for _, c := range cases {
		start := time.Now()
		s, err := hub.New(c.o)
		if err == nil {
			s.Close()
			t.Errorf("%s: the hub started", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || time.Since(start) > 20*time.Second {
			t.Errorf("%s: %v after %s, want %q at once", c.name, err, time.Since(start).Round(time.Millisecond), c.want)
		}
	}
	// The data directory of the refused start on a used port starts later.
	h.stop()
	again := startHub(t, hub.Options{DataDir: dir})
	again.stop()
}
