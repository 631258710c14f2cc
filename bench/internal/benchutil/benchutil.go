// Package benchutil holds what ferry's benchmark programs share: running a
// child process with its wall time and peak RSS, logging, writing results,
// and naming the commit measured.
package benchutil

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Child runs name with args and returns what it printed, its wall time,
// its peak RSS in MiB (getrusage; KiB on Linux) and its exit code.
func Child(ctx context.Context, name string, args ...string) (stdout, stderr []byte, wall time.Duration, rssMiB float64, code int, err error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start)
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rssMiB = float64(ru.Maxrss) / 1024
		}
	}
	return out.Bytes(), errb.Bytes(), wall, rssMiB, code, err
}

// Logf logs one line to stderr as "hh:mm:ss <program>: <message>".
func Logf(program, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().Format("15:04:05"), program, fmt.Sprintf(format, args...))
}

// WriteJSON writes v as indented JSON at path, creating its folder.
func WriteJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// Tail returns the last n bytes of s, trimmed, marked with "…" when cut.
func Tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// OrDash returns s, or "-" when it is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// GitCommit returns HEAD's short hash in root, with "+dirty" for local
// changes, or "" outside a git checkout.
func GitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += "+dirty"
	}
	return c
}
