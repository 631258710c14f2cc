package images

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Limit bounds the requests ferry makes to one registry.
type Limit struct {
	// Concurrency is the number of requests in flight at once, each
	// until its answer's headers arrive (0: no bound).
	Concurrency int `json:"concurrency,omitempty"`
	// QPS is the number of requests started per second (0: no bound).
	QPS float64 `json:"qps,omitempty"`
}

// ParseLimits parses "HOST=CONCURRENCY[/QPS]" entries ("/QPS" alone
// bounds only the rate); HOST "*" is every registry without an entry.
func ParseLimits(entries []string) (map[string]Limit, error) {
	out := map[string]Limit{}
	for _, e := range entries {
		host, spec, ok := strings.Cut(e, "=")
		if !ok || host == "" || spec == "" {
			return nil, fmt.Errorf("%q: want HOST=CONCURRENCY[/QPS], like registry.example.com=8/20", e)
		}
		if strings.ContainsAny(host, "/@ ") {
			return nil, fmt.Errorf("%q: host %q: want host[:port] as requests name it, without a scheme or path, like registry.example.com:5000", e, host)
		}
		conc, qps, _ := strings.Cut(spec, "/")
		var l Limit
		var err error
		if conc != "" {
			if l.Concurrency, err = strconv.Atoi(conc); err != nil || l.Concurrency < 1 {
				return nil, fmt.Errorf("%q: concurrency %q: want a whole number of at least 1", e, conc)
			}
		}
		if qps != "" || strings.HasSuffix(spec, "/") {
			if l.QPS, err = strconv.ParseFloat(qps, 64); err != nil || !(l.QPS >= 0.01) || math.IsInf(l.QPS, 0) {
				return nil, fmt.Errorf("%q: requests per second %q: want a number of at least 0.01", e, qps)
			}
		}
		if _, dup := out[host]; dup {
			return nil, fmt.Errorf("%q: %s has two limits", e, host)
		}
		out[host] = l
	}
	return out, nil
}

// Retry-After bounds: a wait a registry asks for is honoured up to
// maxRetryAfter per answer and maxRetryAfterTries times per request;
// beyond that the 429 goes to the retries above (RetryPolicy), which
// fail the image, naming the registry's answer.
const (
	maxRetryAfter      = 60 * time.Second
	maxRetryAfterTries = 10
	// maxRetryAfterTotal bounds the waits (added up over its requests,
	// which wait side by side) after which this transport sends one
	// image's requests again: past it a 429 goes to the retries
	// (go-containerregistry's and Copier.again's, each still meeting the
	// registry's pause), which fail the image, naming the registry's
	// answer. It bounds the waits ferry adds, not the image's time.
	maxRetryAfterTotal = 10 * time.Minute
)

// politeTransport keeps ferry within each registry's limits: at most
// Limit.Concurrency requests in flight and Limit.QPS started per second
// (golang.org/x/time/rate), and a 429 Too Many Requests with a
// Retry-After pauses every request to that registry for that long, then
// the request is sent again. Docker Hub's rate-limit headers
// (ratelimit-limit, ratelimit-remaining) are kept to name in an error.
type politeTransport struct {
	inner  http.RoundTripper
	limits map[string]Limit
	onWait func(host string, wait time.Duration)
	hosts  sync.Map // host -> *hostState
}

type hostState struct {
	sem       chan struct{} // nil: no bound
	lim       *rate.Limiter // nil: no bound
	mu        sync.Mutex
	notBefore time.Time
	waits     int64
	waited    time.Duration
	limit     string // Docker Hub's ratelimit-limit
	remaining string // and ratelimit-remaining, as last answered
}

func newPoliteTransport(inner http.RoundTripper, limits map[string]Limit, onWait func(string, time.Duration)) *politeTransport {
	return &politeTransport{inner: inner, limits: limits, onWait: onWait}
}

func (t *politeTransport) host(h string) *hostState {
	if s, ok := t.hosts.Load(h); ok {
		return s.(*hostState)
	}
	l, ok := t.limits[h]
	if !ok {
		l = t.limits["*"]
	}
	s := &hostState{}
	if l.Concurrency > 0 {
		s.sem = make(chan struct{}, l.Concurrency)
	}
	if l.QPS > 0 {
		s.lim = rate.NewLimiter(rate.Limit(l.QPS), 1)
	}
	got, _ := t.hosts.LoadOrStore(h, s)
	return got.(*hostState)
}

func (t *politeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	h := t.host(req.URL.Host)
	for try := 1; ; try++ {
		release, err := h.acquire(req.Context())
		if err != nil {
			return nil, err
		}
		resp, err := t.inner.RoundTrip(req)
		if err != nil {
			release()
			return nil, err
		}
		// The slot is the request's until its answer's headers: a body left
		// unread or unclosed by a caller (a retried error's) holds none.
		release()
		h.remember(resp.Header)
		wait, ok := retryAfter(resp.Header, time.Now())
		if resp.StatusCode == http.StatusTooManyRequests && ok && wait <= maxRetryAfter {
			h.pause(wait) // every request to the registry waits, even one not sent again
		}
		w := waitsFrom(req.Context())
		if resp.StatusCode != http.StatusTooManyRequests || !ok || wait > maxRetryAfter || try >= maxRetryAfterTries || (req.Body != nil && req.GetBody == nil) ||
			(w != nil && w.total()+wait > maxRetryAfterTotal) {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if w != nil {
			w.add(wait)
		}
		if t.onWait != nil {
			t.onWait(req.URL.Host, wait)
		}
		if req.Body != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// acquire waits for the registry's pause, its rate and a free slot.
func (h *hostState) acquire(ctx context.Context) (release func(), err error) {
	h.mu.Lock()
	until := time.Until(h.notBefore)
	h.mu.Unlock()
	if until > 0 {
		select {
		case <-time.After(until):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if h.lim != nil {
		if err := h.lim.Wait(ctx); err != nil {
			return nil, err
		}
	}
	if h.sem == nil {
		return func() {}, nil
	}
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() { once.Do(func() { <-h.sem }) }, nil
}

func (h *hostState) pause(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if until := time.Now().Add(d); until.After(h.notBefore) {
		h.notBefore = until
	}
	h.waits++
	h.waited += d
}

func (h *hostState) remember(hdr http.Header) {
	if r := hdr.Get("Ratelimit-Remaining"); r != "" {
		h.mu.Lock()
		h.remaining, h.limit = r, hdr.Get("Ratelimit-Limit")
		h.mu.Unlock()
	}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(hdr http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(hdr.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// RegistryWaits is what one registry asked of ferry in a run.
type RegistryWaits struct {
	Host string `json:"host"`
	// Waits counts its 429 answers with a Retry-After (each pauses every
	// request to it, the one answered sent again or not), and WaitSeconds
	// adds up the pauses.
	Waits       int64   `json:"waits"`
	WaitSeconds float64 `json:"waitSeconds"`
	// RateLimit and RateLimitRemaining are Docker Hub's ratelimit-limit
	// and ratelimit-remaining headers as last answered ("100;w=21600").
	RateLimit          string `json:"rateLimit,omitempty"`
	RateLimitRemaining string `json:"rateLimitRemaining,omitempty"`
}

// Registries lists the registries that asked ferry to wait or told it
// their rate limit, by host.
func (c *Copier) Registries() []RegistryWaits {
	var out []RegistryWaits
	c.polite.hosts.Range(func(k, v any) bool {
		h := v.(*hostState)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.waits > 0 || h.remaining != "" {
			out = append(out, RegistryWaits{Host: k.(string), Waits: h.waits, WaitSeconds: h.waited.Seconds(), RateLimit: h.limit, RateLimitRemaining: h.remaining})
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// UnusedLimits are the hosts of Options.Limits (but "*") that no request
// went to, and the hosts that requests went to: a limit on a misspelt
// host, or on docker.io when the requests go to index.docker.io, bounds
// nothing, and the caller says so.
func (c *Copier) UnusedLimits() (unused, used []string) {
	c.polite.hosts.Range(func(k, _ any) bool {
		used = append(used, k.(string))
		return true
	})
	for h := range c.polite.limits {
		if _, ok := c.polite.hosts.Load(h); !ok && h != "*" {
			unused = append(unused, h)
		}
	}
	sort.Strings(unused)
	sort.Strings(used)
	return unused, used
}

// rateLimitNote says a host's Docker Hub limit, for an error ("" when
// it gave none).
func (c *Copier) rateLimitNote(host string) string {
	v, ok := c.polite.hosts.Load(host)
	if !ok {
		return ""
	}
	h := v.(*hostState)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.remaining == "" {
		return ""
	}
	return fmt.Sprintf(" (the registry's rate limit: %s remaining of %s)", h.remaining, h.limit)
}

// waits counts one operation's Retry-After waits (through its context).
type waits struct {
	n     atomic.Int64
	nanos atomic.Int64
}

func (w *waits) add(d time.Duration)  { w.n.Add(1); w.nanos.Add(int64(d)) }
func (w *waits) count() int64         { return w.n.Load() }
func (w *waits) seconds() float64     { return w.total().Seconds() }
func (w *waits) total() time.Duration { return time.Duration(w.nanos.Load()) }

type waitsKey struct{}

func withWaits(ctx context.Context) (context.Context, *waits) {
	w := &waits{}
	return context.WithValue(ctx, waitsKey{}, w), w
}

func waitsFrom(ctx context.Context) *waits {
	w, _ := ctx.Value(waitsKey{}).(*waits)
	return w
}
