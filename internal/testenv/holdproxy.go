package testenv

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// HoldProxy is a reverse proxy (to an S3 server, say) that, while held,
// holds every request whose URL path contains a given substring until
// Release, so a test can stop a process in the middle of an upload.
// Get one from StartHoldProxy; it stops at the test's cleanup.
type HoldProxy struct {
	// Endpoint is the proxy's base URL, "http://127.0.0.1:PORT".
	Endpoint string
	// Arrived receives one value each time a request is held.
	Arrived chan struct{}

	mu      sync.Mutex
	match   string
	release chan struct{}
	srv     *http.Server
}

// StartHoldProxy proxies to target (a base URL) on a free port on 127.0.0.1.
func StartHoldProxy(t testing.TB, target string) (*HoldProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &HoldProxy{Endpoint: "http://" + l.Addr().String(), Arrived: make(chan struct{}, 100), release: make(chan struct{})}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		match, release := p.match, p.release
		p.mu.Unlock()
		if match != "" && strings.Contains(r.URL.Path, match) {
			p.Arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(func() { p.srv.Close() })
	return p, nil
}

// Hold holds requests whose path contains match from now on.
func (p *HoldProxy) Hold(match string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match = match
}

// Release lets held requests through and stops holding.
func (p *HoldProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match = ""
	close(p.release)
	p.release = make(chan struct{})
}
