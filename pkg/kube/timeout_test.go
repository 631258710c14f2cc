package kube

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestResponseTimeout: a request whose answer does not start within the
// timeout fails, naming the cluster and the request; one whose answer
// starts at once may stream for longer (a watch); the request's context
// is released when the body is closed.
func TestResponseTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stall":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/stream":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for i := range 3 {
				time.Sleep(150 * time.Millisecond)
				_, _ = io.WriteString(w, strings.Repeat("x", i+1))
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	cfg := WithResponseTimeout(&rest.Config{Host: srv.URL}, "stalled", 200*time.Millisecond)
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = client.Get(srv.URL + "/stall")
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "cluster stalled: the API server did not answer GET /stall within 200ms") {
		t.Errorf("a stalled request: %v, want the cluster, the request and the timeout named", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a stalled request failed after %s, want about 200ms", d)
	}
	resp, err := client.Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "xxxxxx" {
		t.Errorf("a stream longer than the timeout: %q, %v; want all of it", body, err)
	}
	// The caller's own cancellation is its own error.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/stall", nil)
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := client.Do(req); err == nil || errors.Is(err, ErrNoAnswer) {
		t.Errorf("a request its caller cancelled: %v, want context canceled", err)
	}
}
