package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// RetryPolicy bounds the retries of one registry request: up to Attempts
// tries in all, waiting Initial, then doubling (less when doubling would
// pass Max by the last wait), plus up to 50 % jitter. Requests are retried on timeouts, connection resets and the status
// codes 408, 429, 500, 502, 503 and 504 (go-containerregistry's retrying
// transport); a refused connection or a 401/403 is not retried.
type RetryPolicy struct {
	Attempts     int
	Initial, Max time.Duration
}

// DefaultRetry is 5 attempts, 200 ms doubling to at most 5 s.
var DefaultRetry = RetryPolicy{Attempts: 5, Initial: 200 * time.Millisecond, Max: 5 * time.Second}

// factor is 2, or less when doubling would take the last wait past Max.
// (go-containerregistry's Backoff.Cap stops retrying once it is reached,
// so the cap is kept by the factor instead.)
func (p RetryPolicy) factor() float64 {
	waits := p.Attempts - 2 // growth steps between the first and the last wait
	if waits < 1 || p.Initial <= 0 || p.Max <= p.Initial {
		return 2
	}
	if f := math.Pow(float64(p.Max)/float64(p.Initial), 1/float64(waits)); f < 2 {
		return f
	}
	return 2
}

// retryStatusCodes are retried (go-containerregistry's defaults, minus
// the CDN-specific ones).
var retryStatusCodes = []int{http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}

// retriesTotal counts every registry request retried by this process.
var retriesTotal atomic.Int64

// Retries returns how many registry requests this process has retried
// after a transient failure (what the Backup's and Restore's
// status.retries.registry report).
func Retries() int64 { return retriesTotal.Load() }

// retryOptions returns go-containerregistry's retry options for p, with a
// predicate that counts each retryable failure in n (and in Retries).
func (p RetryPolicy) options(n *atomic.Int64) []remote.Option {
	if p.Attempts <= 0 {
		p = DefaultRetry
	}
	backoff := remote.Backoff{Duration: p.Initial, Factor: p.factor(), Jitter: 0.5, Steps: p.Attempts}
	predicate := func(err error) bool {
		if !retryable(err) {
			return false
		}
		n.Add(1)
		retriesTotal.Add(1)
		return true
	}
	return []remote.Option{remote.WithRetryBackoff(backoff), remote.WithRetryPredicate(predicate), remote.WithRetryStatusCodes(retryStatusCodes...)}
}

// retryable is go-containerregistry's default predicate (temporary
// errors, EOF, resets, broken pipes) without refused connections, which
// mean the registry is not there.
func retryable(err error) bool {
	if err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	var t interface{ Temporary() bool }
	if errors.As(err, &t) && t.Temporary() {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// pingCache answers go-containerregistry's ping, the unauthenticated GET
// /v2/ it sends whenever it builds a transport for a repository (once per
// repository and operation, so several times per image), with the
// registry's first answer to it: the answer names only the scheme and the
// auth challenge, which do not change while a Copier runs. A sync then
// pings each registry once instead of a few times per image; every ping
// saved is a round trip before an image's first request and a request
// the registry does not serve. Pings that arrive while the first is in
// flight wait for its answer. Only a 200 or 401 is kept (what the ping
// reads); after an error or any other answer the next ping asks again.
// An HTTPS ping to a host:port that answered plain HTTP fails at once
// (go-containerregistry tries both for an insecure registry).
type pingCache struct {
	inner http.RoundTripper
	mu    sync.Mutex
	calls map[string]*pingCall // scheme://host
}

// pingCall is the first ping of one registry: answer is set (or not)
// before done closes.
type pingCall struct {
	done   chan struct{}
	answer *pingAnswer
}

type pingAnswer struct {
	code   int
	proto  string
	header http.Header
}

func (p *pingCache) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Path != "/v2/" || req.Header.Get("Authorization") != "" {
		return p.inner.RoundTrip(req)
	}
	if err := p.plainHTTP(req); err != nil {
		return nil, err
	}
	key := req.URL.Scheme + "://" + req.URL.Host
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[string]*pingCall{}
	}
	call, asked := p.calls[key]
	if !asked {
		call = &pingCall{done: make(chan struct{})}
		p.calls[key] = call
	}
	p.mu.Unlock()
	if asked {
		select {
		case <-call.done:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		if a := call.answer; a != nil {
			return &http.Response{Status: fmt.Sprintf("%d %s", a.code, http.StatusText(a.code)), StatusCode: a.code, Proto: a.proto, ProtoMajor: 1, ProtoMinor: 1,
				Header: a.header.Clone(), Body: http.NoBody, Request: req}, nil
		}
		if err := p.plainHTTP(req); err != nil {
			return nil, err
		}
		return p.inner.RoundTrip(req) // the first ping got no answer to keep
	}
	resp, err := p.inner.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized) {
		call.answer = &pingAnswer{code: resp.StatusCode, proto: resp.Proto, header: resp.Header.Clone()}
	} else {
		p.mu.Lock()
		delete(p.calls, key)
		p.mu.Unlock()
	}
	close(call.done)
	return resp, err
}

// plainHTTP fails an HTTPS ping to a host:port that answered plain HTTP
// (waiting for that answer if it is on its way): go-containerregistry
// tries both schemes for an insecure registry, and HTTPS cannot answer
// there.
func (p *pingCache) plainHTTP(req *http.Request) error {
	if req.URL.Scheme != "https" {
		return nil
	}
	p.mu.Lock()
	plain, ok := p.calls["http://"+req.URL.Host]
	p.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case <-plain.done:
	case <-req.Context().Done():
		return req.Context().Err()
	}
	if plain.answer == nil {
		return nil
	}
	return fmt.Errorf("%s answers plain HTTP (ping)", req.URL.Host)
}

// countingTransport counts the request-body bytes of blob uploads
// (PATCH and PUT under /blobs/uploads/) that reach the wire, and keeps
// the digest a registry answers each manifest PUT with (manifests).
type countingTransport struct {
	inner     http.RoundTripper
	n         *atomic.Int64
	manifests *sync.Map
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && (req.Method == http.MethodPatch || req.Method == http.MethodPut) && strings.Contains(req.URL.Path, "/blobs/uploads/") {
		r2 := req.Clone(req.Context())
		r2.Body = &countingBody{ReadCloser: req.Body, n: t.n}
		return t.inner.RoundTrip(r2)
	}
	if g, _ := req.Context().Value(gateKey{}).(*manifestGate); g != nil && req.Method == http.MethodPut && g.key == req.URL.Host+req.URL.Path {
		if err := g.wait(req.Context()); err != nil {
			return nil, err
		}
	}
	resp, err := t.inner.RoundTrip(req)
	if err == nil && t.manifests != nil && req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/manifests/") && resp.StatusCode/100 == 2 {
		t.manifests.Store(req.URL.Host+req.URL.Path, resp.Header.Get("Docker-Content-Digest"))
	}
	return resp, err
}

// manifestGate holds the PUT of one manifest (its manifestPutKey) until
// open: an image's blobs move while its referrers are looked for, and its
// manifest is written once they are known, so a failed lookup leaves
// nothing under its tag.
type manifestGate struct {
	key  string
	done chan struct{}
	once sync.Once
	err  error
}

type gateKey struct{}

// errManifestHeld is the PUT's error when the lookup it waited for failed.
var errManifestHeld = errors.New("the manifest is not written")

// withGate returns ctx carrying a gate for ref's manifest PUT.
func withGate(ctx context.Context, ref name.Reference) (context.Context, *manifestGate) {
	g := &manifestGate{key: manifestPutKey(ref), done: make(chan struct{})}
	return context.WithValue(ctx, gateKey{}, g), g
}

func (g *manifestGate) open(err error) {
	g.once.Do(func() { g.err = err; close(g.done) })
}

func (g *manifestGate) wait(ctx context.Context) error {
	select {
	case <-g.done:
		if g.err != nil {
			return fmt.Errorf("%w: %v", errManifestHeld, g.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// manifestPutKey is the key of ref's manifest PUT in
// countingTransport.manifests.
func manifestPutKey(ref name.Reference) string {
	return ref.Context().RegistryStr() + "/v2/" + ref.Context().RepositoryStr() + "/manifests/" + ref.Identifier()
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// DefaultIdleTimeout is how long a registry may stay silent (Options.IdleTimeout).
const DefaultIdleTimeout = 60 * time.Second

// idleTransport fails a response body that stays silent for longer than
// idle between two reads (a stalled blob download); the read then returns
// an error and the retries take over.
type idleTransport struct {
	inner http.RoundTripper
	idle  time.Duration
}

func (t *idleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	b := &idleBody{ReadCloser: resp.Body, idle: t.idle}
	b.timer = time.AfterFunc(t.idle, func() {
		b.stalled.Store(true)
		_ = b.ReadCloser.Close()
	})
	resp.Body = b
	return resp, nil
}

type idleBody struct {
	io.ReadCloser
	idle    time.Duration
	timer   *time.Timer
	stalled atomic.Bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.stalled.Load() {
		return n, fmt.Errorf("registry sent nothing for %s: %w", b.idle, syscall.ECONNRESET)
	}
	if err == nil {
		b.timer.Reset(b.idle)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.ReadCloser.Close()
}
