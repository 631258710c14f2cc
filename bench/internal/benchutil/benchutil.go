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
//
// The peak RSS is at least this process's own at the time: os/exec starts
// the child with vfork, and Linux counts the high-water mark of the
// memory the child leaves at exec (this process's) in the child's
// ru_maxrss. A large parent measures a child through a small one that it
// starts first (see ChildUsage).
func Child(ctx context.Context, name string, args ...string) (stdout, stderr []byte, wall time.Duration, rssMiB float64, code int, err error) {
	u, err := ChildUsage(ctx, name, args...)
	return u.Stdout, u.Stderr, u.Wall, u.RSSMiB, u.Code, err
}

// Usage is how a child process ran: what it printed, its wall time, peak
// RSS (MiB, getrusage), CPU time (user and system) and exit code.
type Usage struct {
	Stdout, Stderr []byte
	Wall           time.Duration
	RSSMiB         float64
	CPU            time.Duration
	Code           int
}

// ChildUsage runs name with args and returns its Usage.
func ChildUsage(ctx context.Context, name string, args ...string) (Usage, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	u := Usage{Wall: time.Since(start)}
	if cmd.ProcessState != nil {
		u.Code = cmd.ProcessState.ExitCode()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			u.RSSMiB = float64(ru.Maxrss) / 1024
			u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	u.Stdout, u.Stderr = out.Bytes(), errb.Bytes()
	return u, err
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
