package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ---------------------------------------------------------------- the launcher

// Every timed child is started through bench/internal/launch, a small
// command that measures it: a child's peak RSS from getrusage is at least
// the memory of the process that started it, and this one is large (see
// that command's doc).

// launched is the launcher's record of a command: its wall time from
// start to exit, peak RSS, user and system CPU time, and exit code.
type launched struct {
	Seconds    float64 `json:"seconds"`
	MaxRSSMiB  float64 `json:"maxRSSMiB"`
	CPUSeconds float64 `json:"cpuSeconds"`
	Code       int     `json:"code"`
}

// buildTool builds the command at ./pkg of the repository at root into dir.
func buildTool(ctx context.Context, root, dir, pkg string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./"+pkg)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./%s: %w", pkg, err)
	}
	return out, nil
}

// launch runs name with args through the launcher, with env added to the
// environment, and returns what the command printed and how it ran. The
// error is set when it did not run or exited non-zero.
func launch(ctx context.Context, launcher string, env []string, name string, args ...string) (stdout, stderr []byte, u launched, err error) {
	f, err := os.CreateTemp("", "ferry-load-usage-")
	if err != nil {
		return nil, nil, u, err
	}
	usage := f.Name()
	f.Close()
	defer os.Remove(usage)
	cmd := exec.CommandContext(ctx, launcher, append([]string{"-usage", usage, "--", name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	data, rerr := os.ReadFile(usage)
	if rerr == nil && len(data) > 0 {
		rerr = json.Unmarshal(data, &u)
	} else if rerr == nil {
		rerr = errors.New("the launcher wrote no usage record")
	}
	if rerr != nil {
		u.Code = -1
		runErr = errors.Join(runErr, fmt.Errorf("launching %s: %w", name, rerr))
	}
	return out.Bytes(), errb.Bytes(), u, runErr
}
