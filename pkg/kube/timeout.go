package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// DefaultResponseTimeout bounds how long a request to a cluster waits for
// the API server's answer to start (its response headers). It is far
// above what any request ferry makes needs (an admission webhook may take
// up to 30 s), and it leaves watches, exec streams and long lists alone,
// whose headers come at once: an API server that accepts connections and
// then stalls fails the request instead of holding it forever.
const DefaultResponseTimeout = time.Minute

// WithResponseTimeout returns a copy of cfg whose requests fail when the
// API server has not started to answer within d, with an error naming the
// cluster, the request and d.
func WithResponseTimeout(cfg *rest.Config, name string, d time.Duration) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = transport.Wrappers(cfg.WrapTransport, func(rt http.RoundTripper) http.RoundTripper {
		return &responseTimeout{next: rt, cluster: name, d: d}
	})
	return cfg
}

// responseTimeout cancels a request whose response headers do not arrive
// within d.
type responseTimeout struct {
	next    http.RoundTripper
	cluster string
	d       time.Duration
}

// ErrNoAnswer is wrapped when an API server did not answer in time.
var ErrNoAnswer = errors.New("the API server did not answer")

func (r *responseTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	cause := fmt.Errorf("cluster %s: %w %s %s within %s", r.cluster, ErrNoAnswer, req.Method, req.URL.Path, r.d)
	timer := time.AfterFunc(r.d, func() { cancel(cause) })
	resp, err := r.next.RoundTrip(req.WithContext(ctx))
	timer.Stop()
	if err != nil {
		timedOut := context.Cause(ctx) == cause
		cancel(nil)
		if timedOut {
			return nil, cause
		}
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The upgraded connection (exec, port-forward) lives on with the
		// request's own context; its body is the connection itself.
		return resp, nil
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, nil
}

// cancelOnClose releases the request's context once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
