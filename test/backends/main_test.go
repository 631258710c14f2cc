// Package backends owns the storage-backend conformance suite: the same
// table of ferry runs (backup, restore, verify, delete, a key prefix,
// encryption, an image bundle, a volume repository, an interrupted
// backup, a listing past one page, wrong credentials) against every kind
// of backup storage location, each on a real server: file://, s3://
// (versitygw), gs:// (fake-gcs-server) and azblob:// (Azurite). The
// subtests are named TestBackends/<scheme>/<case>.
package backends

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubeferry/ferry/internal/testenv"
)

// ferryBin is the binary under test, built once by TestMain.
var ferryBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ferry-backends-bin-")
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

// ferry runs the binary with args and env (added to the environment), for
// at most 3 minutes.
func ferry(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ferryBin, args...)
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
