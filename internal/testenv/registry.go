package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Registry is a running Debian docker-registry (distribution 2.8) on
// 127.0.0.1, storing on the filesystem. Get one from StartRegistry; end
// it with Stop.
type Registry struct {
	// Host is "127.0.0.1:PORT", the registry part of image references.
	Host string
	// NodeHost is "HostIP:PORT", the same registry as nodes and pods of
	// StartNodeClusters reach it. It is set only in a confined network
	// namespace (RequireConfinedNetwork), where the registry then listens on
	// every address: loopback and the veths to the nodes.
	NodeHost string
	// Dir is the storage root (storage.filesystem.rootdirectory); blobs are
	// under docker/registry/v2/blobs/sha256/<2 hex>/<hex>/data.
	Dir string
	// User and Password are the htpasswd credentials ("" without auth).
	User, Password string
	// LogPath receives the registry's stdout and stderr.
	LogPath string

	tmp      string
	cmd      *exec.Cmd
	done     chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// RegistryOptions configure StartRegistry. With User set, the registry
// requires HTTP basic auth (htpasswd, bcrypt) with User and Password.
type RegistryOptions struct {
	User, Password string
}

var (
	registryOnce sync.Once
	registryBin  string
	registryErr  error
)

// RegistryBinary returns the path of docker-registry, running
// hack/install-tools.sh (which apt-get installs it) when it is not on PATH.
func RegistryBinary() (string, error) {
	registryOnce.Do(func() {
		if p, err := exec.LookPath("docker-registry"); err == nil {
			registryBin = p
			return
		}
		if _, err := ToolsBinDirFresh(); err != nil {
			registryErr = err
			return
		}
		registryBin, registryErr = exec.LookPath("docker-registry")
		if registryErr != nil {
			registryErr = fmt.Errorf("testenv: docker-registry not found after hack/install-tools.sh: %w", registryErr)
		}
	})
	return registryBin, registryErr
}

// ToolsBinDirFresh runs hack/install-tools.sh even when versitygw is
// already installed (it installs the Debian packages the image tests need).
func ToolsBinDirFresh() (string, error) {
	return resolveDir("", "install-tools.sh", []string{"versitygw"})
}

// StartRegistry starts "docker-registry serve CONFIG" on a free loopback
// port with a fresh temporary storage root (deletes enabled), and waits
// until GET /v2/ answers (timeout 20 s; typically 80 ms). If t is non-nil,
// t.Cleanup(Stop) is registered.
//
// Errors: docker-registry missing and not installable, the registry
// exiting early (the error quotes its log) or not answering in time. A
// port taken between choosing and binding is retried up to 3 times.
func StartRegistry(ctx context.Context, t testing.TB, opts RegistryOptions) (*Registry, error) {
	if t != nil {
		t.Helper()
	}
	bin, err := RegistryBinary()
	if err != nil {
		return nil, err
	}
	var r *Registry
	for attempt := 0; attempt < 3; attempt++ {
		r, err = startRegistry(ctx, bin, opts)
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if t != nil {
		t.Cleanup(func() {
			if err := r.Stop(); err != nil {
				t.Logf("testenv: %v", err)
			}
		})
	}
	return r, nil
}

func startRegistry(ctx context.Context, bin string, opts RegistryOptions) (_ *Registry, err error) {
	reapStaleRegistries()
	tmp, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", registryDirPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("testenv: registry: %w", err)
	}
	r := &Registry{Dir: filepath.Join(tmp, "data"), LogPath: filepath.Join(tmp, "registry.log"), tmp: tmp, User: opts.User, Password: opts.Password}
	defer func() {
		if err != nil {
			_ = r.Stop()
			err = fmt.Errorf("testenv: registry: %w", err)
		}
	}()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r.Host = fmt.Sprintf("127.0.0.1:%d", port)
	listen := r.Host
	if RequireConfinedNetwork() == nil {
		r.NodeHost, listen = fmt.Sprintf("%s:%d", HostIP, port), fmt.Sprintf(":%d", port)
	}
	auth := ""
	if opts.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		htpasswd := filepath.Join(tmp, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(opts.User+":"+string(hash)+"\n"), 0o600); err != nil {
			return nil, err
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: ferry-test\n    path: %s\n", htpasswd)
	}
	config := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
http:
  addr: %s
  secret: ferry-testenv
%s`, r.Dir, listen, auth)
	configPath := filepath.Join(tmp, "config.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(r.LogPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	r.cmd = exec.Command(bin, "serve", configPath)
	r.cmd.Stdout, r.cmd.Stderr, r.cmd.Dir = log, log, tmp
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start docker-registry: %w", err)
	}
	r.done = make(chan struct{})
	go func() {
		_ = r.cmd.Wait()
		close(r.done)
	}()
	return r, r.waitReady(ctx, 20*time.Second)
}

// waitReady polls GET /v2/ until any HTTP answer (401 included) arrives.
func (r *Registry) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Host+"/v2/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-r.done:
			return fmt.Errorf("docker-registry exited before answering on %s; log %s ends:\n%s", r.Host, r.LogPath, tailFile(r.LogPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("docker-registry not answering on %s: %w; log %s ends:\n%s", r.Host, ctx.Err(), r.LogPath, tailFile(r.LogPath, 20))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// BlobPath returns the file that holds blob hex (a SHA-256 digest's hex)
// in the registry's storage.
func (r *Registry) BlobPath(hex string) string {
	return filepath.Join(r.Dir, "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data")
}

// Stop stops the registry (SIGTERM, SIGKILL after 5 s) and removes its
// storage and log. Safe to call more than once.
func (r *Registry) Stop() error {
	r.stopOnce.Do(func() { r.stopErr = stopProcess("registry", r.cmd, r.done, r.tmp) })
	return r.stopErr
}

// CPU is the processor time (user and system) the registry process has
// used so far, from /proc (0 when it cannot be read): benchmarks count
// what the registries on the same cores cost.
func (r *Registry) CPU() time.Duration {
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid … utime stime: the 14th and 15th fields, in
	// clock ticks of 1/100 s (USER_HZ).
	end := strings.LastIndexByte(string(stat), ')')
	if end < 0 {
		return 0
	}
	f := strings.Fields(string(stat[end+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}
