// Package testenv starts real local test infrastructure for ferry's tests:
// Kubernetes control planes (etcd + kube-apiserver through controller-runtime
// envtest, plus kube-controller-manager), real object stores (versitygw for
// S3, fake-gcs-server for GCS, Azurite for Azure Blob Storage), and a
// small "kubectl create -f" equivalent (Apply) for test input.
//
// The binaries are built from Go modules by the repository's hack/ scripts
// into a cache outside the clone (docs/design.md#test-infrastructure); the first call in a fresh
// machine may take minutes. Nothing here is meant for production code.
//
// Typical use:
//
//	cs, err := testenv.StartNamedClusters(ctx, t, "src", "dst")
//	s3, err := testenv.StartS3(ctx, t)
//	objs, err := testenv.Apply(ctx, cs[0].Config, "app", "testdata/app.yaml")
package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ModulePath is the module whose root RepoRoot looks for.
const ModulePath = "github.com/kubeferry/ferry"

var (
	binOnce   sync.Once
	binDir    string
	binErr    error
	toolsOnce sync.Once
	toolsDir  string
	toolsErr  error
)

// RepoRoot walks up from the current working directory to the first directory
// whose go.mod declares module github.com/kubeferry/ferry, and returns its
// absolute path. Tests run with the package directory as cwd, so this works
// from any package of the module. Error: no such directory up to "/".
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testenv: getwd: %w", err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(data, ModulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: no go.mod for module %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

// declaresModule reports whether go.mod content has "module <path>".
func declaresModule(gomod []byte, path string) bool {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "module" && strings.Trim(f[1], `"`) == path {
			return true
		}
	}
	return false
}

// BinDir returns the directory holding the etcd, kube-apiserver,
// kube-controller-manager and kubectl binaries (Kubernetes v1.37.2, etcd
// v3.7.3).
//
// If FERRY_K8S_BIN is set and already holds all four binaries, it is returned
// as is. Otherwise hack/build-control-plane.sh is run (it honours
// FERRY_K8S_BIN, builds only the missing binaries — a cold build takes about
// 11 minutes on 2 cores — and prints the directory on its last stdout line).
// The script's progress goes to os.Stderr. The result (and any error) is
// computed once per process. Concurrent builds from several test processes
// are serialised with a lock file in os.TempDir().
func BinDir() (string, error) {
	binOnce.Do(func() {
		binDir, binErr = resolveDir("FERRY_K8S_BIN", "build-control-plane.sh",
			[]string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"})
	})
	return binDir, binErr
}

// ToolsBinDir returns the directory holding the test tools: versitygw
// v1.8.0, fake-gcs-server v1.56.1 and azurite-blob (a launcher of the npm
// package Azurite 3.37.0, installed into azurite-3.37.0/ next to it).
//
// If FERRY_TOOLS_BIN is set and holds all three, it is returned as is;
// otherwise hack/install-tools.sh is run (it installs what is missing and
// prints the directory on its last stdout line). Computed once per process;
// errors as for BinDir.
func ToolsBinDir() (string, error) {
	toolsOnce.Do(func() {
		toolsDir, toolsErr = resolveDir("FERRY_TOOLS_BIN", "install-tools.sh", []string{"versitygw", "fake-gcs-server", "azurite-blob"})
	})
	return toolsDir, toolsErr
}

// resolveDir implements BinDir and ToolsBinDir.
func resolveDir(envVar, script string, bins []string) (string, error) {
	if d := os.Getenv(envVar); d != "" && hasAll(d, bins) {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(os.TempDir(), "ferry-testenv-build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()

	path := filepath.Join(root, "hack", script)
	var stdout bytes.Buffer
	cmd := exec.Command("bash", path)
	cmd.Dir = root
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testenv: %s failed: %w (stdout: %s)", path, err, strings.TrimSpace(stdout.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", fmt.Errorf("testenv: %s printed no directory", path)
	}
	if !hasAll(dir, bins) {
		return "", fmt.Errorf("testenv: %s printed %q, which lacks one of %v", path, dir, bins)
	}
	return dir, nil
}

// hasAll reports whether dir holds every named regular file.
func hasAll(dir string, names []string) bool {
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// lockFile takes an exclusive flock on path, creating it; the returned
// function releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("testenv: open lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("testenv: lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
