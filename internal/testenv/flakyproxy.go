package testenv

import (
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// FlakyProxy forwards to a server and fails a share of requests at
// random: half of the failures answer 503, half reset the connection.
type FlakyProxy struct {
	// URL is the proxy's base URL, "http://127.0.0.1:PORT".
	URL string
	// CutShare is the share of the GET responses, of those not failed,
	// that the proxy cuts after their first KiB by resetting the
	// connection: a transfer broken midway, which the client sees after a
	// 200 and its own retries of the request do not cover. Set it before
	// the first request.
	CutShare float64
	// Total and Injured count the requests and those failed or cut on
	// purpose.
	Total, Injured atomic.Int64

	proxy *httputil.ReverseProxy
	share float64
	mu    sync.Mutex
	rng   *rand.Rand
}

// StartFlakyProxy starts a FlakyProxy in front of target (a base URL)
// that fails share of the requests, with a seeded random sequence; it is
// stopped when the test ends.
func StartFlakyProxy(t testing.TB, target string, share float64, seed int64) *FlakyProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("testenv: flaky proxy target %q: %v", target, err)
	}
	p := &FlakyProxy{proxy: httputil.NewSingleHostReverseProxy(u), share: share, rng: rand.New(rand.NewSource(seed))}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// S3URL is s3's URL of bucket with the endpoint replaced by the proxy's.
func (p *FlakyProxy) S3URL(s3 *S3, bucket string) string {
	return strings.Replace(s3.URL(bucket), s3.Endpoint, p.URL, 1)
}

func (p *FlakyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.Total.Add(1)
	p.mu.Lock()
	x, reset, cut := p.rng.Float64(), p.rng.Intn(2) == 0, p.rng.Float64() < p.CutShare
	p.mu.Unlock()
	if x >= p.share {
		if cut && r.Method == http.MethodGet {
			p.Injured.Add(1)
			w = &cutWriter{ResponseWriter: w, left: 1024}
		}
		p.proxy.ServeHTTP(w, r)
		return
	}
	p.Injured.Add(1)
	if reset {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
					_ = tc.SetLinger(0) // RST, not FIN
				}
				conn.Close()
				return
			}
		}
	}
	http.Error(w, "injected failure", http.StatusServiceUnavailable)
}

// cutWriter passes on the first left bytes of a response body and then
// aborts the connection (http.ErrAbortHandler).
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if len(b) <= c.left {
		c.left -= len(b)
		return c.ResponseWriter.Write(b)
	}
	_, _ = c.ResponseWriter.Write(b[:c.left])
	c.left = 0
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	panic(http.ErrAbortHandler)
}
