package e2e

import (
	"context"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

// flakyProxy forwards to target and fails a share of requests at random:
// half of the failures answer 503, half reset the connection.
type flakyProxy struct {
	proxy          *httputil.ReverseProxy
	share          float64
	mu             sync.Mutex
	rng            *rand.Rand
	total, injured atomic.Int64
}

func (p *flakyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.total.Add(1)
	p.mu.Lock()
	x, reset := p.rng.Float64(), p.rng.Intn(2) == 0
	p.mu.Unlock()
	if x < p.share {
		p.injured.Add(1)
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
		return
	}
	p.proxy.ServeHTTP(w, r)
}

// TestFlakyObjectStore puts a proxy that fails 20% of requests (503 or a
// connection reset) in front of the S3 server: backup and restore still
// complete, and their status counts the retries.
func TestFlakyObjectStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.CreateBucket(ctx, "flaky"); err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(s3.Endpoint)
	fp := &flakyProxy{proxy: httputil.NewSingleHostReverseProxy(target), share: 0.2, rng: rand.New(rand.NewSource(42))}
	srv := httptest.NewServer(fp)
	defer srv.Close()
	storage := strings.Replace(s3.URL("flaky"), s3.Endpoint, srv.URL, 1)
	if storage == s3.URL("flaky") {
		t.Fatalf("could not point %s at the proxy", storage)
	}

	src := kubernetes.NewForConfigOrDie(e.src.Config)
	createNamespace(t, src, "wobbly")
	createConfigMaps(t, src, "wobbly", 500)
	run := func(args ...string) result {
		return ferry(t, s3.Env(), append(args, "--kubeconfig", e.kubeconfig, "--storage", storage, "-o", "json")...)
	}
	var retried int
	for _, name := range []string{"wobbly-1", "wobbly-2", "wobbly-3", "wobbly-4", "wobbly-5"} {
		b := run("backup", "create", name, "--context", "src", "--include-namespaces", "wobbly")
		if b.code != 0 {
			t.Fatalf("backup %s through the flaky proxy: exit %d\n%s\n%s", name, b.code, b.stdout, b.stderr)
		}
		var bs struct {
			Status struct {
				Phase   string         `json:"phase"`
				Retries map[string]int `json:"retries"`
			} `json:"status"`
		}
		mustJSON(t, b.stdout, &bs)
		r := run("restore", "create", name, "--from-backup", name, "--context", "dst", "--existing-resource-policy", "update")
		if r.code != 0 {
			t.Fatalf("restore %s through the flaky proxy: exit %d\n%s\n%s", name, r.code, r.stdout, r.stderr)
		}
		var rs struct {
			Status struct {
				Phase   string         `json:"phase"`
				Counts  map[string]int `json:"counts"`
				Retries map[string]int `json:"retries"`
			} `json:"status"`
		}
		mustJSON(t, r.stdout, &rs)
		if bs.Status.Phase != "Completed" || rs.Status.Phase != "Completed" || rs.Status.Counts["created"]+rs.Status.Counts["unchanged"] < 500 {
			t.Errorf("%s: backup %s, restore %s %v", name, bs.Status.Phase, rs.Status.Phase, rs.Status.Counts)
		}
		retried += bs.Status.Retries["objectStore"] + rs.Status.Retries["objectStore"]
		t.Logf("%s: backup retries %v, restore retries %v", name, bs.Status.Retries, rs.Status.Retries)
	}
	t.Logf("proxy: %d requests, %d failed on purpose; %d retries counted", fp.total.Load(), fp.injured.Load(), retried)
	if fp.injured.Load() < 3 {
		t.Fatalf("the proxy failed only %d requests: the test proves little", fp.injured.Load())
	}
	if retried == 0 {
		t.Error("requests failed but no retry was counted")
	}
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	if got := len(sourceData(t, dst, "wobbly")); got != 500 {
		t.Errorf("target has %d ConfigMaps, want 500", got)
	}
}
