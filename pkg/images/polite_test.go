package images

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseReferrers(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
		err  string
	}{
		{nil, "all", ""},
		{[]string{"all"}, "all", ""},
		{[]string{"none"}, "none", ""},
		{[]string{"application/spdx+json,application/vnd.dev.cosign.simplesigning.v1+json"}, "application/spdx+json,application/vnd.dev.cosign.simplesigning.v1+json", ""},
		{[]string{"all", "application/spdx+json"}, "", "all and none stand alone"},
		{[]string{"all,all"}, "", "all and none stand alone"},
		{[]string{","}, "", "names nothing"},
		{[]string{" "}, "", "names nothing"},
		{[]string{"sbom"}, "", `"sbom": want all, none, or artifact types`},
		{[]string{"a/b/c"}, "", "want all, none"},
	} {
		f, err := ParseReferrers(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || f.String() != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, f.String(), err, c.want)
		}
	}
	if _, err := ParsePlatforms([]string{" , "}); err == nil || !strings.Contains(err.Error(), "names no platform") {
		t.Errorf("--platform ' , ': %v, want it refused", err)
	}
	for typ, keeps := range map[string]bool{"application/vnd.dev.cosign.artifact.sig.v1+json": true, "application/vnd.cncf.notary.signature": true, "application/spdx+json": false} {
		if g, _ := ParseReferrers([]string{typ}); g.KeepsSignatures() != keeps {
			t.Errorf("--referrers %s keeps signatures: %v, want %v", typ, !keeps, keeps)
		}
	}
	f, _ := ParseReferrers([]string{"application/spdx+json"})
	if !f.wants("application/spdx+json") || f.wants("application/vnd.dsse.envelope.v1+json") {
		t.Error("a type filter chooses by artifact type")
	}
	if (ReferrerFilter{}).wants("") != true || (ReferrerFilter{None: true}).wants("x/y") {
		t.Error("the zero filter is all; none is none")
	}
}

func TestParseLimits(t *testing.T) {
	l, err := ParseLimits([]string{"reg.example.com=8/20", "*=4", "slow:5000=/0.5"})
	if err != nil {
		t.Fatal(err)
	}
	if l["reg.example.com"] != (Limit{8, 20}) || l["*"] != (Limit{Concurrency: 4}) || l["slow:5000"] != (Limit{QPS: 0.5}) {
		t.Errorf("%+v", l)
	}
	for _, bad := range []string{"reg", "reg=", "=4", "reg=0", "reg=x", "reg=4/-1", "reg=4/abc", "reg=/NaN", "reg=/", "reg=/1e-300", "reg=/Inf", "https://reg=1", "reg/ns=1"} {
		if _, err := ParseLimits([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := ParseLimits([]string{"reg=1", "reg=2"}); err == nil || !strings.Contains(err.Error(), "two limits") {
		t.Errorf("a host given twice: %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{"2": 2 * time.Second, "0": 0, "Sat, 05 Dec 2026 10:00:30 GMT": 30 * time.Second} {
		h := http.Header{"Retry-After": {in}}
		if d, ok := retryAfter(h, now); !ok || d != want {
			t.Errorf("%q: %s %v, want %s", in, d, ok, want)
		}
	}
	for _, in := range []string{"", "soon", "-3"} {
		if _, ok := retryAfter(http.Header{"Retry-After": {in}}, now); ok {
			t.Errorf("%q read as a wait", in)
		}
	}
}

// A 429 with Retry-After pauses the registry and the request goes again
// (its body replayed); other requests to it wait too, and the wait is
// counted in the operation's context and for the host.
func TestPoliteRetryAfter(t *testing.T) {
	var calls atomic.Int64
	var bodies []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Ratelimit-Limit", "100;w=21600")
		w.Header().Set("Ratelimit-Remaining", "99;w=21600")
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	var waited []time.Duration
	p := newPoliteTransport(http.DefaultTransport, nil, func(_ string, d time.Duration) { waited = append(waited, d) })
	ctx, w := withWaits(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/v2/x/manifests/1", strings.NewReader("manifest"))
	start := time.Now()
	resp, err := p.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" || time.Since(start) < time.Second {
		t.Errorf("status %d %q after %s, want 200 after the 1s wait", resp.StatusCode, body, time.Since(start))
	}
	if len(bodies) != 2 || bodies[1] != "manifest" {
		t.Errorf("bodies sent %q, want the body again", bodies)
	}
	if w.count() != 1 || w.seconds() != 1 || len(waited) != 1 {
		t.Errorf("waits %d (%.1fs), callbacks %v", w.count(), w.seconds(), waited)
	}
	c := &Copier{polite: p}
	rs := c.Registries()
	if len(rs) != 1 || rs[0].Waits != 1 || rs[0].RateLimitRemaining != "99;w=21600" {
		t.Errorf("registries %+v", rs)
	}
	// An image that has waited its total already: the 429 goes up, to
	// go-containerregistry's retries and their end.
	calls.Store(0)
	ctx, w = withWaits(context.Background())
	w.add(maxRetryAfterTotal)
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v2/x/manifests/1", nil)
	time.Sleep(time.Second) // the registry's pause from the first 429 is over
	start = time.Now()
	resp, err = p.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || time.Since(start) > 500*time.Millisecond || w.count() != 1 {
		t.Errorf("past the total: %v %v after %s, %d waits; want the 429 at once", resp, err, time.Since(start), w.count())
	}
	resp.Body.Close()
	// A body that cannot be replayed is not sent again: the 429 goes up.
	calls.Store(0)
	req, _ = http.NewRequest(http.MethodPatch, srv.URL+"/v2/x/blobs/uploads/1", io.NopCloser(strings.NewReader("blob")))
	resp, err = p.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a streamed body: %v %v, want the 429", resp, err)
	}
	resp.Body.Close()
}

// Limit.Concurrency bounds the requests in flight to one host, each
// until its answer's headers arrive.
func TestPoliteConcurrency(t *testing.T) {
	var inFlight, most atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	p := newPoliteTransport(http.DefaultTransport, map[string]Limit{host: {Concurrency: 2}}, nil)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := p.RoundTrip(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if most.Load() > 2 || most.Load() == 0 {
		t.Errorf("%d requests in flight at once, want at most 2", most.Load())
	}
}

// TestWantedReferrers: a push that leaves a referrer behind by its type
// leaves what refers to it too (an SBOM's signature without the SBOM
// would name nothing at the target).
func TestWantedReferrers(t *testing.T) {
	const sig, sbom = "application/vnd.dev.cosign.simplesigning.v1+json", "application/spdx+json"
	recorded := []Referrer{
		{Subject: "sha256:img", Digest: "sha256:sig", ArtifactType: sig, Outcome: Copied},
		{Subject: "sha256:img", Digest: "sha256:sbom", ArtifactType: sbom},
		{Subject: "sha256:sbom", Digest: "sha256:sbomsig", ArtifactType: sig},
		{Subject: "sha256:sig", Digest: "sha256:sigsig", ArtifactType: sig},
	}
	f, err := ParseReferrers([]string{sig})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range NewCopier(Options{Referrers: f}).wanted(recorded) {
		got = append(got, r.Digest+" "+string(r.Outcome))
	}
	if strings.Join(got, ",") != "sha256:sig ,sha256:sigsig " {
		t.Errorf("wanted %q, want the image's signature and its own, outcomes cleared", got)
	}
	if n := len(NewCopier(Options{}).wanted(recorded)); n != 4 {
		t.Errorf("all: %d of 4", n)
	}
}

// TestPoliteSlotFreedAtHeaders: an answer whose body nobody reads or
// closes (a retried error's) does not hold its registry's slot: with a
// limit of 1 the next request goes at once (it hung for ever).
func TestPoliteSlotFreedAtHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, strings.Repeat("e", 1<<20)) // more than the connection buffers
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	p := newPoliteTransport(http.DefaultTransport, map[string]Limit{host: {Concurrency: 1}}, nil)
	var unread []*http.Response
	defer func() {
		for _, r := range unread {
			r.Body.Close()
		}
	}()
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := p.RoundTrip(req)
		cancel()
		if err != nil {
			t.Fatalf("request %d: %v (the first's unread body held the only slot)", i+1, err)
		}
		unread = append(unread, resp)
	}
}
