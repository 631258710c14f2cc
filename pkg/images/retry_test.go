package images

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kubeferry/ferry/internal/testenv"
)

// failEvery forwards to a registry and answers every nth request 503
// (every other failure resets the connection instead).
type failEvery struct {
	proxy    *httputil.ReverseProxy
	n        int64
	count    atomic.Int64
	injected atomic.Int64
}

func (f *failEvery) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := f.count.Add(1)
	if c%f.n == 0 {
		i := f.injected.Add(1)
		if i%2 == 0 {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
		}
		http.Error(w, "injected", http.StatusServiceUnavailable)
		return
	}
	f.proxy.ServeHTTP(w, r)
}

// TestCopyRetries copies through a proxy that fails every 7th request
// (503 or a reset connection): every image arrives with its digest, and
// the retries are counted.
func TestCopyRetries(t *testing.T) {
	ctx := context.Background()
	src, dst := startRegistry(t, testenv.RegistryOptions{}), startRegistry(t, testenv.RegistryOptions{})
	target, _ := url.Parse("http://" + dst.Host)
	fp := &failEvery{proxy: httputil.NewSingleHostReverseProxy(target), n: 7}
	srv := httptest.NewServer(fp)
	defer srv.Close()
	proxyHost := strings.TrimPrefix(srv.URL, "http://")
	var tasks []Task
	for _, n := range []string{"a", "b", "c", "d"} {
		pushImage(t, src, "flaky/"+n+":1", 8<<10, 2)
		tasks = append(tasks, Task{Source: src.Host + "/flaky/" + n + ":1", Target: proxyHost + "/flaky/" + n + ":1"})
	}
	pushIndex(t, src, "flaky/multi:1", "linux/amd64", "linux/arm64")
	tasks = append(tasks, Task{Source: src.Host + "/flaky/multi:1", Target: proxyHost + "/flaky/multi:1"})
	rs := NewCopier(Options{Concurrency: 2, Retry: RetryPolicy{Attempts: 8, Initial: 10e6, Max: 100e6}}).CopyAll(ctx, tasks, nil)
	var retries int64
	for i, r := range rs {
		if r.Outcome != Copied {
			t.Errorf("%s: %s %s", r.Source, r.Outcome, r.Error)
			continue
		}
		retries += r.Retries
		repo := strings.TrimPrefix(tasks[i].Target, proxyHost+"/")
		want, _ := src.Digest(strings.TrimPrefix(tasks[i].Source, src.Host+"/"))
		if got, ok := dst.Digest(repo); !ok || got != want {
			t.Errorf("%s at the target: %v %v, want %v", repo, got, ok, want)
		}
	}
	if fp.injected.Load() == 0 || retries == 0 {
		t.Errorf("%d failures injected, %d retries counted; want both > 0", fp.injected.Load(), retries)
	}
	t.Logf("%d of %d requests failed on purpose; %d retries counted", fp.injected.Load(), fp.count.Load(), retries)
}

func TestRetryFactor(t *testing.T) {
	for _, tc := range []struct {
		p    RetryPolicy
		want float64
	}{
		{DefaultRetry, 2}, // 200ms..1.6s: under the 5s cap
		{RetryPolicy{Attempts: 6, Initial: 10e6, Max: 160e6}, 2},                 // 4 doublings reach Max
		{RetryPolicy{Attempts: 6, Initial: 10e6, Max: 80e6}, 1.681792830507429},  // 8^(1/4)
		{RetryPolicy{Attempts: 10, Initial: 100e6, Max: 1e9}, 1.333521432163324}, // 10^(1/8)
	} {
		if got := tc.p.factor(); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("%+v: factor %v, want %v", tc.p, got, tc.want)
		}
	}
}
