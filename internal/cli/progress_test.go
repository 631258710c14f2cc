package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vbauerster/mpb/v8"

	"github.com/kubeferry/ferry/pkg/helperpod"
)

// TestVolumeLines: each claim a helper pod moves gets a line of its own
// with its files and bytes, marked done at its end.
func TestVolumeLines(t *testing.T) {
	var out bytes.Buffer
	p := mpb.New(mpb.WithOutput(&out), mpb.WithWidth(100), mpb.WithAutoRefresh())
	pr := &progress{p: p, bar: p.AddBar(0)}
	dp := pr.dataBar("volume data")
	dp.volume("claim shop/web-data", helperpod.Progress{Bytes: 1 << 20, Files: 2}, false)
	dp.volume("claim shop/db-0", helperpod.Progress{Bytes: 5 << 20, Files: 3}, true)
	dp.volume("claim shop/web-data", helperpod.Progress{Bytes: 5 << 20, Files: 3}, true)
	dp.stop()
	pr.stop()
	s := out.String()
	for _, want := range []string{"claim shop/web-data", "claim shop/db-0", "3 files, 5.0MiB, done"} {
		if !strings.Contains(s, want) {
			t.Errorf("progress output lacks %q:\n%s", want, s)
		}
	}
}
