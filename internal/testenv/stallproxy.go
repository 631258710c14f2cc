package testenv

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/time/rate"
)

// StallProxy is a TCP proxy (TLS and HTTP/2 pass through it untouched)
// that a test can stall: while stalled it accepts connections and reads
// what they send, but forwards nothing either way, as an API server or
// etcd that accepts connections and then never answers. It can also
// throttle the answers, as a slow link to object storage. Get one from
// StartStallProxy; it stops at the test's cleanup.
type StallProxy struct {
	// Addr is the proxy's "HOST:PORT".
	Addr string

	l       net.Listener
	target  string
	answers *rate.Limiter // the target's bytes to the clients

	mu      sync.Mutex
	resumed chan struct{} // closed while not stalled
	closed  bool
	conns   []net.Conn
}

// StartStallProxy proxies to target ("host:port") on a free port on
// 127.0.0.1.
func StartStallProxy(t testing.TB, target string) (*StallProxy, error) {
	return StartStallProxyOn(t, "127.0.0.1", target)
}

// StartStallProxyOn proxies to target on a free port of host: HostIP for
// a proxy that the pods of StartNodeClusters reach.
func StartStallProxyOn(t testing.TB, host, target string) (*StallProxy, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	p := &StallProxy{Addr: l.Addr().String(), l: l, target: target, resumed: make(chan struct{}),
		answers: rate.NewLimiter(rate.Inf, pipeChunk)}
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
		go p.pipe(up, c, nil)
		go p.pipe(c, up, p.answers)
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

// pipeChunk is the most pipe reads at once, and the throttle's burst.
const pipeChunk = 32 << 10

// pipe copies src to dst, holding each chunk while the proxy is stalled,
// at the rate of limit if not nil.
func (p *StallProxy) pipe(dst, src net.Conn, limit *rate.Limiter) {
	buf := make([]byte, pipeChunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			resumed := p.resumed
			p.mu.Unlock()
			<-resumed
			if limit != nil {
				_ = limit.WaitN(context.Background(), n)
			}
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

// Throttle forwards the target's answers at bytesPerSecond from now on,
// on open connections and new ones; 0 lifts the limit.
func (p *StallProxy) Throttle(bytesPerSecond int) {
	if bytesPerSecond <= 0 {
		p.answers.SetLimit(rate.Inf)
		return
	}
	p.answers.SetLimit(rate.Limit(bytesPerSecond))
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
