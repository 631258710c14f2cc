// Package e2e runs the ferry binary against real local clusters (etcd,
// kube-apiserver and kube-controller-manager from internal/testenv) and a
// real S3 server (versitygw), as a user would.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// ferryBin is the binary under test, built once by TestMain.
var ferryBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ferry-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ferryBin = filepath.Join(dir, "ferry")
	build := exec.Command("go", "build", "-o", ferryBin, "./cmd/ferry")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ferry:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result of one ferry run.
type result struct {
	stdout, stderr string
	code           int
}

// ferry runs the binary with args and env (added to the environment).
func ferry(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return ferryCmd(t, ferryBin, env, args...)
}

// ferryCmd runs program (ferry, or a launcher of it) as ferry does.
func ferryCmd(t *testing.T, program string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running ferry %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// env is a pair of clusters with a shared kubeconfig and a file store.
type env struct {
	src, dst   *testenv.Cluster
	kubeconfig string
	storage    string
	// storageEnv and storageArgs are what ferry needs besides --storage
	// to read the location (its credentials, --encryption-identity).
	storageEnv, storageArgs []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	cs, err := testenv.StartNamedClusters(ctx, t, "src", "dst")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &env{src: cs[0], dst: cs[1], kubeconfig: filepath.Join(dir, "kubeconfig"), storage: "file://" + filepath.Join(dir, "store")}
	if err := testenv.WriteKubeconfig(e.kubeconfig, cs...); err != nil {
		t.Fatal(err)
	}
	return e
}

// run runs ferry with this env's kubeconfig and storage.
func (e *env) run(t *testing.T, args ...string) result {
	t.Helper()
	return ferry(t, e.storageEnv, append(append(args, "--kubeconfig", e.kubeconfig, "--storage", e.storage), e.storageArgs...)...)
}

func (e *env) backup(t *testing.T, name string, args ...string) *v1alpha1.Backup {
	t.Helper()
	r := e.run(t, append([]string{"backup", "create", name, "--context", "src", "-o", "json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("backup %s: exit %d\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
	}
	b := &v1alpha1.Backup{}
	mustJSON(t, r.stdout, b)
	return b
}

func (e *env) restore(t *testing.T, name, from string, args ...string) (*v1alpha1.Restore, result) {
	t.Helper()
	r := e.run(t, append([]string{"restore", "create", name, "--from-backup", from, "--context", "dst", "-o", "json"}, args...)...)
	rs := &v1alpha1.Restore{}
	if r.code == 0 || r.code == 2 {
		mustJSON(t, r.stdout, rs)
	}
	return rs, r
}

// results reads a restore's per-item results through `restore describe -o json`.
func (e *env) results(t *testing.T, name string) []map[string]any {
	t.Helper()
	r := e.run(t, "restore", "describe", name, "-o", "json")
	if r.code != 0 {
		t.Fatalf("restore describe %s: %s", name, r.stderr)
	}
	var out struct {
		Results struct {
			Items []map[string]any `json:"items"`
		} `json:"results"`
	}
	mustJSON(t, r.stdout, &out)
	return out.Results.Items
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decoding ferry output: %v\n%s", err, s)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func sleep() { time.Sleep(500 * time.Millisecond) }
