package images

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeferry/ferry/internal/testenv"
)

// requestCounter stands in front of a real registry and counts the
// requests it passes on, by method and path.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) count(method, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if path == "" {
		return c.n[method]
	}
	return c.n[method+" "+path]
}

func countingProxy(t *testing.T, r *testenv.Registry) (string, *requestCounter) {
	t.Helper()
	u, _ := url.Parse("http://" + r.Host)
	p := httputil.NewSingleHostReverseProxy(u)
	c := &requestCounter{n: map[string]int{}}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c.mu.Lock()
		c.n[req.Method+" "+req.URL.Path]++
		c.mu.Unlock()
		p.ServeHTTP(w, req)
	}))
	s.Listener = sniffListener{Listener: s.Listener, c: c}
	s.Start()
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://"), c
}

// sniffListener counts the connections that open with a TLS handshake
// (an HTTPS ping to this plain-HTTP proxy) as "TLS".
type sniffListener struct {
	net.Listener
	c *requestCounter
}

func (l sniffListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: conn, c: l.c}, nil
}

type sniffConn struct {
	net.Conn
	c    *requestCounter
	once sync.Once
}

func (s *sniffConn) Read(b []byte) (int, error) {
	n, err := s.Conn.Read(b)
	if n > 0 {
		s.once.Do(func() {
			if b[0] == 0x16 { // TLS record type: handshake
				s.c.mu.Lock()
				s.c.n["TLS"]++
				s.c.mu.Unlock()
			}
		})
	}
	return n, err
}

// TestCopyRequests: a sync of several signed images pings each registry
// once (go-containerregistry pings whenever it builds a transport, a few
// times per image), and reads each image's config from the source once
// (it was read for the image's platform; the copy uploads those bytes).
func TestCopyRequests(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	srcHost, srcCount := countingProxy(t, src)
	dstHost, dstCount := countingProxy(t, startRegistry(t, testenv.RegistryOptions{}))
	var tasks []Task
	var configs []string
	for i := 0; i < 3; i++ {
		repo := fmt.Sprintf("r/app%d", i)
		img := pushImage(t, src, repo+":1", 1024, 2)
		d, _ := img.Digest()
		signImage(t, src, repo, d)
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, "/v2/"+repo+"/blobs/"+m.Config.Digest.String())
		tasks = append(tasks, Task{Source: srcHost + "/" + repo + ":1", Target: dstHost + "/" + repo + ":1"})
	}
	// A missing image fails once: its prefetch's answer is the copy's.
	tasks = append(tasks, Task{Source: srcHost + "/r/app0:missing", Target: dstHost + "/r/missing:1"})
	rs := NewCopier(Options{Insecure: true}).CopyAll(context.Background(), tasks, nil)
	for _, r := range rs[:3] {
		if r.Outcome != Copied || len(r.Referrers) != 1 || r.Referrers[0].Outcome != Copied {
			t.Fatalf("%s: %s %q, referrers %+v; want copied with its signature", r.Source, r.Outcome, r.Error, r.Referrers)
		}
	}
	if r := rs[3]; r.Outcome != Failed || !strings.Contains(r.Error, "r/app0:missing") {
		t.Errorf("missing image: %s %q", r.Outcome, r.Error)
	}
	if n := srcCount.count(http.MethodHead, "/v2/r/app0/manifests/missing"); n != 1 {
		t.Errorf("the missing image's manifest asked %d times, want 1", n)
	}
	// go-containerregistry tries HTTPS beside HTTP for an insecure
	// registry: once the registry has answered plain HTTP, no more.
	t.Logf("HTTPS attempts: %d at the source, %d at the target", srcCount.count("TLS", ""), dstCount.count("TLS", ""))
	if n, m := srcCount.count("TLS", ""), dstCount.count("TLS", ""); n > 4 || m > 4 {
		t.Errorf("%d and %d HTTPS attempts at the source and target, want at most the first images' (4)", n, m)
	}
	if n := srcCount.count(http.MethodGet, "/v2/"); n != 1 {
		t.Errorf("source pinged %d times, want 1", n)
	}
	if n := dstCount.count(http.MethodGet, "/v2/"); n != 1 {
		t.Errorf("target pinged %d times, want 1", n)
	}
	for _, p := range configs {
		if n := srcCount.count(http.MethodGet, p); n != 1 {
			t.Errorf("GET %s %d times at the source, want 1", p, n)
		}
	}
}

// TestPingCache: a 200 or 401 answer is kept, with its challenge; an
// error or another answer is not, and the next ping asks again; a ping
// waiting for the first gives up with its own context.
func TestPingCache(t *testing.T) {
	var pings atomic.Int64
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := pings.Add(1); {
		case r.URL.Path != "/v2/":
			w.WriteHeader(http.StatusNotFound)
		case n == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case n == 3:
			<-hold
			fallthrough
		default:
			w.Header().Set("WWW-Authenticate", `Basic realm="r"`)
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	defer close(hold)
	p := &pingCache{inner: http.DefaultTransport}
	ping := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v2/", nil)
		return p.RoundTrip(req)
	}
	ctx := context.Background()
	if resp, err := ping(ctx); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("first ping: %v %v", resp, err)
	}
	for i := 0; i < 3; i++ {
		resp, err := ping(ctx)
		if err != nil || resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm="r"` || resp.Request == nil {
			t.Fatalf("ping %d: %v %v, want the 401 with its challenge", i+2, resp, err)
		}
		resp.Body.Close()
	}
	if n := pings.Load(); n != 2 {
		t.Errorf("%d pings reached the registry, want 2 (the 503 is not kept)", n)
	}
	// Another registry (host) is asked on its own; its first ping hangs,
	// and a second one waits for it until its own context ends.
	other := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, other+"/v2/", nil)
		if resp, err := p.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}()
	for pings.Load() < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(wctx, http.MethodGet, other+"/v2/", nil)
	if _, err := p.RoundTrip(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting ping: %v, want its deadline", err)
	}
}

// TestPrefetchCounts: CopyAll fetches an image's source while the images
// before it copy (prefetch); a source that answers 429 with a
// Retry-After to those fetches is waited out, and every wait is counted
// in the result of the image it was for.
func TestPrefetchCounts(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	u, _ := url.Parse("http://" + src.Host)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var refused atomic.Int64
	start := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.Contains(req.URL.Path, "/manifests/") && time.Since(start) < 1500*time.Millisecond {
			refused.Add(1)
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}`, http.StatusTooManyRequests)
			return
		}
		proxy.ServeHTTP(w, req)
	}))
	defer srv.Close()
	srcHost := strings.TrimPrefix(srv.URL, "http://")
	dst := startRegistry(t, testenv.RegistryOptions{})
	var tasks []Task
	for i := 0; i < 4; i++ {
		repo := fmt.Sprintf("p/app%d", i)
		pushImage(t, src, repo+":1", 1024, 1)
		tasks = append(tasks, Task{Source: srcHost + "/" + repo + ":1", Target: dst.Host + "/" + repo + ":1"})
	}
	start = time.Now()
	rs := NewCopier(Options{Concurrency: 1, Insecure: true, Referrers: ReferrerFilter{None: true}}).CopyAll(context.Background(), tasks, nil)
	var waits int64
	for _, r := range rs {
		if r.Outcome != Copied {
			t.Fatalf("%s: %s %q", r.Source, r.Outcome, r.Error)
		}
		waits += r.Waits
	}
	if refused.Load() < 2 || waits != refused.Load() {
		t.Errorf("%d answers of 429, %d waits in the results; want every one counted (and more than one image's)", refused.Load(), waits)
	}
}

// TestUnusedLimits: a registry limit on a host no request went to is
// named (it bounded nothing); one on a host used, and "*", are not.
func TestUnusedLimits(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	dst := startRegistry(t, testenv.RegistryOptions{})
	pushImage(t, src, "u/app:1", 1024, 1)
	c := NewCopier(Options{Limits: map[string]Limit{src.Host: {Concurrency: 2}, "docker.io": {Concurrency: 1}, "*": {Concurrency: 4}}})
	if r := c.Copy(context.Background(), Task{Source: src.Host + "/u/app:1", Target: dst.Host + "/u/app:1"}); r.Outcome != Copied {
		t.Fatalf("%s %q", r.Outcome, r.Error)
	}
	unused, used := c.UnusedLimits()
	if strings.Join(unused, ",") != "docker.io" || len(used) != 2 || !slices.Contains(used, src.Host) || !slices.Contains(used, dst.Host) {
		t.Errorf("unused %v, used %v; want docker.io unused, both registries used", unused, used)
	}
}

// TestPrefetchAhead: with one image at a time, the second image's
// source manifest is asked for while the first is still copying (before
// the first's manifest is written at the target).
func TestPrefetchAhead(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	dst := startRegistry(t, testenv.RegistryOptions{})
	var mu sync.Mutex
	var events []string
	event := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	proxy := func(r *testenv.Registry, side string) string {
		u, _ := url.Parse("http://" + r.Host)
		p := httputil.NewSingleHostReverseProxy(u)
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			switch {
			case side == "source" && strings.HasPrefix(req.URL.Path, "/v2/a/app0/blobs/"):
				time.Sleep(300 * time.Millisecond) // the first image copies slowly
			case side == "source" && strings.HasPrefix(req.URL.Path, "/v2/a/app1/manifests/"):
				event("source manifest of app1")
			case side == "target" && req.Method == http.MethodPut && req.URL.Path == "/v2/a/app0/manifests/1":
				event("target manifest of app0")
			}
			p.ServeHTTP(w, req)
		}))
		t.Cleanup(s.Close)
		return strings.TrimPrefix(s.URL, "http://")
	}
	srcHost, dstHost := proxy(src, "source"), proxy(dst, "target")
	var tasks []Task
	for i := 0; i < 2; i++ {
		repo := fmt.Sprintf("a/app%d", i)
		pushImage(t, src, repo+":1", 1024, 1)
		tasks = append(tasks, Task{Source: srcHost + "/" + repo + ":1", Target: dstHost + "/" + repo + ":1"})
	}
	rs := NewCopier(Options{Concurrency: 1, Insecure: true, Referrers: ReferrerFilter{None: true}}).CopyAll(context.Background(), tasks, nil)
	for _, r := range rs {
		if r.Outcome != Copied {
			t.Fatalf("%s: %s %q", r.Source, r.Outcome, r.Error)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) < 2 || events[0] != "source manifest of app1" {
		t.Errorf("events %q: want app1's manifest asked for before app0's is written", events)
	}
}
