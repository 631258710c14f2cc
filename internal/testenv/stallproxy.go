package testenv

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// StallProxy is a TCP proxy (TLS and HTTP/2 pass through it untouched)
// that a test can stall: while stalled it accepts connections and reads
// what they send, but forwards nothing either way, as an API server or
// etcd that accepts connections and then never answers. Get one from
// StartStallProxy; it stops at the test's cleanup.
type StallProxy struct {
	// Addr is the proxy's "127.0.0.1:PORT".
	Addr string

	l      net.Listener
	target string

	mu      sync.Mutex
	resumed chan struct{} // closed while not stalled
	closed  bool
	conns   []net.Conn
}

// StartStallProxy proxies to target ("host:port") on a free port on
// 127.0.0.1.
func StartStallProxy(t testing.TB, target string) (*StallProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &StallProxy{Addr: l.Addr().String(), l: l, target: target, resumed: make(chan struct{})}
	close(p.resumed)
	go p.serve()
	t.Cleanup(p.close)
	return p, nil
}

func (p *StallProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// track remembers the connections, for close; false once closed.
func (p *StallProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	p.conns = append(p.conns, conns...)
	return true
}

// pipe copies src to dst, holding each chunk while the proxy is stalled.
func (p *StallProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			resumed := p.resumed
			p.mu.Unlock()
			<-resumed
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			return
		}
	}
}

// Stall stops forwarding, on open connections and new ones.
func (p *StallProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
		p.resumed = make(chan struct{})
	default:
	}
}

// Resume forwards again, what was held first.
func (p *StallProxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
	default:
		close(p.resumed)
	}
}

func (p *StallProxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.l.Close()
	p.Resume()
	for _, c := range conns {
		c.Close()
	}
}
