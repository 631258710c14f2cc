package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// GCS is a running fake-gcs-server v1.56.1 (a Google Cloud Storage
// emulator of the JSON and XML APIs; filesystem backend, plain HTTP, no
// authentication) on 127.0.0.1. Get one from StartGCS; end it with Stop.
type GCS struct {
	// Endpoint is "http://127.0.0.1:PORT".
	Endpoint string
	// NodeEndpoint is "http://HostIP:PORT", the same server as nodes and
	// pods of StartNodeClusters reach it; set only in a confined network
	// namespace (RequireConfinedNetwork), where the server then listens on
	// every address.
	NodeEndpoint string
	// Dir is the filesystem backend's root: one folder per bucket.
	Dir string
	// LogPath receives the server's stdout and stderr.
	LogPath string

	tmp      string
	cmd      *exec.Cmd
	done     chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// StartGCS starts "fake-gcs-server -scheme http -host 127.0.0.1 -port PORT
// -backend filesystem -filesystem-root DIR -public-host 127.0.0.1
// -external-url URL" on a free port with a fresh temporary DIR, and waits
// until it answers any HTTP request (timeout 20 s). fake-gcs-server comes
// from ToolsBinDir (which may install it first). If t is non-nil,
// t.Cleanup(Stop) is registered.
//
// -public-host 127.0.0.1: the XML API (object reads of the Go client
// without storage.WithJSONReads) is served only for requests whose host is
// the public host; a host without port matches every port.
// -external-url: uploads continue at the Location this URL makes; it is
// NodeEndpoint when set (HostIP is then made an address of the tests'
// namespace too, as StartNodeClusters does, so both sides reach it), else
// Endpoint.
//
// Errors: ToolsBinDir failure, the server exiting early (the error quotes
// its log) or not answering in time. A port taken between choosing and
// binding is retried up to 3 times.
func StartGCS(ctx context.Context, t testing.TB) (*GCS, error) {
	if t != nil {
		t.Helper()
	}
	bin, err := ToolsBinDir()
	if err != nil {
		return nil, err
	}
	g, err := startWithRetries(ctx, func() (*GCS, error) { return startGCS(ctx, filepath.Join(bin, "fake-gcs-server")) })
	if err != nil {
		return nil, err
	}
	if t != nil {
		t.Cleanup(func() {
			if err := g.Stop(); err != nil {
				t.Logf("testenv: %v", err)
			}
		})
	}
	return g, nil
}

func startGCS(ctx context.Context, path string) (_ *GCS, err error) {
	tmp, err := os.MkdirTemp("", "ferry-testenv-gcs-")
	if err != nil {
		return nil, fmt.Errorf("testenv: gcs: %w", err)
	}
	g := &GCS{Dir: filepath.Join(tmp, "data"), LogPath: filepath.Join(tmp, "fake-gcs-server.log"), tmp: tmp}
	defer func() {
		if err != nil {
			_ = g.Stop()
			err = fmt.Errorf("testenv: gcs: %w", err)
		}
	}()
	if err = os.Mkdir(g.Dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	bind, loopback, node := listenAddrs(port)
	g.Endpoint = "http://" + loopback
	external := g.Endpoint
	if node != "" {
		// HostIP must be an address here too before the loopback side
		// follows an upload's Location to it.
		if err = setupHostNet(); err != nil {
			return nil, err
		}
		g.NodeEndpoint = "http://" + node
		external = g.NodeEndpoint
	}
	g.cmd = exec.Command(path, "-scheme", "http", "-host", bind, "-port", fmt.Sprint(port),
		"-backend", "filesystem", "-filesystem-root", g.Dir, "-public-host", "127.0.0.1", "-external-url", external, "-log-level", "warn")
	g.cmd.Dir = tmp
	if g.done, err = startLogged(g.cmd, g.LogPath); err != nil {
		return nil, err
	}
	return g, waitHTTP(ctx, "fake-gcs-server", g.Endpoint+"/storage/v1/b", g.done, g.LogPath, 20*time.Second)
}

// Stop stops the server (SIGTERM, SIGKILL after 5 s) and removes Dir and
// the log. Safe to call more than once; later calls return the first
// result.
func (g *GCS) Stop() error {
	g.stopOnce.Do(func() { g.stopErr = stopProcess("gcs", g.cmd, g.done, g.tmp) })
	return g.stopErr
}

// CreateBucket creates bucket name through the JSON API (POST
// /storage/v1/b). Errors: the server's refusal (bucket exists, invalid
// name) with its status and body, or the server is unreachable.
func (g *GCS) CreateBucket(ctx context.Context, name string) error {
	body, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.Endpoint+"/storage/v1/b?project=ferry-test", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("testenv: create bucket %q at %s: %w", name, g.Endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("testenv: create bucket %q at %s: %s: %s", name, g.Endpoint, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// URL returns ferry's location URL of bucket for processes of the tests'
// namespace: "gs://BUCKET?endpoint=http://127.0.0.1:PORT" (ferry's endpoint
// parameter; without credentials the client is unauthenticated).
func (g *GCS) URL(bucket string) string { return "gs://" + bucket + "?endpoint=" + g.Endpoint }

// NodeURL is URL with NodeEndpoint, for nodes and pods; "" outside a
// confined network namespace.
func (g *GCS) NodeURL(bucket string) string {
	if g.NodeEndpoint == "" {
		return ""
	}
	return "gs://" + bucket + "?endpoint=" + g.NodeEndpoint
}

// Env returns "STORAGE_EMULATOR_HOST=127.0.0.1:PORT", the Google client
// libraries' emulator switch, for a subprocess whose location is a plain
// gs://BUCKET URL (append it to os.Environ()).
func (g *GCS) Env() []string {
	return []string{"STORAGE_EMULATOR_HOST=" + g.Endpoint[len("http://"):]}
}
