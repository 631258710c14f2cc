package images

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeferry/ferry/internal/testenv"
)

// rejectUploads forwards to a registry but answers every blob upload
// (PATCH or PUT with a body) 500 at once, before reading the body, and
// then goes on reading it slowly: the client's transport is still
// sending the body after the upload has failed.
type rejectUploads struct{ proxy *httputil.ReverseProxy }

func (f rejectUploads) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if (r.Method != http.MethodPatch && r.Method != http.MethodPut) || !strings.Contains(r.URL.Path, "/blobs/uploads/") {
		f.proxy.ServeHTTP(w, r)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	w.WriteHeader(http.StatusInternalServerError)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, err := r.Body.Read(buf); err != nil {
			return
		}
	}
}

// progressLog records OnProgress calls.
type progressLog struct {
	mu              sync.Mutex
	calls           int
	complete, total int64
}

func (p *progressLog) update(_ Task, complete, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	p.complete, p.total = complete, total
}

// TestProgressUploadRejected copies with OnProgress set to a registry
// that rejects an upload while its body is still being sent. The copy
// fails with the target named; it must not panic (go-containerregistry's
// WithProgress sent on its closed channel from the transport's write
// loop here, failing CI).
func TestProgressUploadRejected(t *testing.T) {
	ctx := context.Background()
	src, dst := startRegistry(t, testenv.RegistryOptions{}), startRegistry(t, testenv.RegistryOptions{})
	target, _ := url.Parse("http://" + dst.Host)
	srv := httptest.NewServer(rejectUploads{proxy: httputil.NewSingleHostReverseProxy(target)})
	defer srv.Close()
	proxyHost := strings.TrimPrefix(srv.URL, "http://")
	var tasks []Task
	for _, n := range []string{"a", "b", "c"} {
		pushImage(t, src, "big/"+n+":1", 16<<20, 2)
		tasks = append(tasks, Task{Source: src.Host + "/big/" + n + ":1", Target: proxyHost + "/big/" + n + ":1"})
	}
	var p progressLog
	rs := NewCopier(Options{Concurrency: 3, OnProgress: p.update, Retry: RetryPolicy{Attempts: 1}}).CopyAll(ctx, tasks, nil)
	for _, r := range rs {
		if r.Outcome != Failed || !strings.Contains(r.Error, proxyHost) {
			t.Errorf("%s: %s %q; want Failed naming %s", r.Source, r.Outcome, r.Error, proxyHost)
		}
	}
	// The process must outlive the transports still sending the bodies.
	time.Sleep(1500 * time.Millisecond)
}

// TestProgressReportsBlobBytes: a copied image's last report is its
// blob bytes, config and layers, as complete and total.
func TestProgressReportsBlobBytes(t *testing.T) {
	ctx := context.Background()
	src, dst := startRegistry(t, testenv.RegistryOptions{}), startRegistry(t, testenv.RegistryOptions{})
	img := pushImage(t, src, "p/one:1", 1<<20, 3)
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	want := m.Config.Size
	for _, l := range m.Layers {
		want += l.Size
	}
	var p progressLog
	rs := NewCopier(Options{OnProgress: p.update}).CopyAll(ctx, []Task{{Source: src.Host + "/p/one:1", Target: dst.Host + "/p/one:1"}}, nil)
	if rs[0].Outcome != Copied {
		t.Fatalf("%s %s", rs[0].Outcome, rs[0].Error)
	}
	if p.calls == 0 || p.complete != want || p.total != want {
		t.Errorf("last progress %d/%d after %d calls; want %d/%d", p.complete, p.total, p.calls, want, want)
	}
}
