// Command launch runs one command and records how it ran: its wall time
// from start to exit, its peak resident set size and its user and system
// CPU time (getrusage), and its exit code. Benchmarks start the process
// they measure through it.
//
// Why: a child's ru_maxrss is at least the memory of the process it was
// started from. os/exec starts children with vfork, and Linux counts the
// high-water mark of the memory a child leaves at exec, its parent's, in
// the child's ru_maxrss (see benchutil.Child). A benchmark program that
// links client-go is 60 MiB or more once started, and grows as it works;
// this command uses only the standard library and stays at a few MiB, so
// what it reports is the command's own peak.
//
//	launch -usage FILE -- CMD [ARG...]
//
// CMD gets this process's environment, standard input and outputs; the
// record goes to FILE as JSON ({"seconds", "maxRSSMiB", "cpuSeconds",
// "code"}), and launch exits with CMD's exit code (1 if CMD did not run or
// was killed by a signal, 2 for a usage error). CMD is killed if launch
// dies.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Usage is the record written to -usage.
type Usage struct {
	Seconds    float64 `json:"seconds"`
	MaxRSSMiB  float64 `json:"maxRSSMiB"`
	CPUSeconds float64 `json:"cpuSeconds"`
	Code       int     `json:"code"`
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	usage := fs.String("usage", "", "file for the usage record (JSON)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if *usage == "" || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "launch: want -usage FILE -- CMD [ARG...]")
		return 2
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	err := cmd.Run()
	u := Usage{Seconds: time.Since(start).Seconds(), Code: -1}
	if ps := cmd.ProcessState; ps != nil {
		u.Code = ps.ExitCode()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			u.MaxRSSMiB = float64(ru.Maxrss) / 1024 // KiB on Linux
			u.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		}
	} else {
		fmt.Fprintln(os.Stderr, "launch:", err)
	}
	data, _ := json.Marshal(u)
	if err := os.WriteFile(*usage, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "launch:", err)
		return 2
	}
	if u.Code < 0 {
		return 1
	}
	return u.Code
}
