package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// registryDirPrefix starts the name of a registry's temporary directory,
// followed by the PID of the test process that started it and a dash:
// a later run tells a dead run's registry from a live one by it.
const registryDirPrefix = "ferry-testenv-registry-"

var reapRegistriesOnce sync.Once

// reapStaleRegistries stops the registries that test processes which died
// without their cleanup (a panic, a kill) left running, and removes their
// directories; once per process, before its first registry starts. A
// registry is a dead run's when its directory's owner PID is not running
// (a directory without one was written before owners were recorded).
// hack/netns-exec.sh reaps what ran inside its namespaces; this covers a
// `go test` run without it, whose registries run in the main namespace.
func reapStaleRegistries() {
	reapRegistriesOnce.Do(func() {
		var dirs []string
		for _, tmp := range slices.Compact([]string{os.TempDir(), "/tmp"}) {
			m, _ := filepath.Glob(filepath.Join(tmp, registryDirPrefix+"*"))
			dirs = append(dirs, m...)
		}
		for _, dir := range dirs {
			if owner := registryOwner(dir); owner > 0 && processAlive(owner) {
				continue
			}
			if err := reapRegistryDir(dir); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			}
		}
	})
}

// registryOwner is the owner PID in a registry directory's name, 0 when
// it has none.
func registryOwner(dir string) int {
	rest := strings.TrimPrefix(filepath.Base(dir), registryDirPrefix)
	owner, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0
	}
	pid, err := strconv.Atoi(owner)
	if err != nil {
		return 0
	}
	return pid
}

func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// reapRegistryDir SIGKILLs, by PID, each docker-registry serving from dir
// (its working directory), waits for it to be gone, and removes dir.
func reapRegistryDir(dir string) error {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, p := range procs {
		comm, _ := os.ReadFile(filepath.Join(p, "comm"))
		cwd, _ := os.Readlink(filepath.Join(p, "cwd"))
		if strings.TrimSpace(string(comm)) != "docker-registry" || cwd != dir {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
			pids = append(pids, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, pid := range pids {
		for end := time.Now().Add(5 * time.Second); processAlive(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				return fmt.Errorf("stale registry %d (%s) did not exit after SIGKILL", pid, dir)
			}
		}
	}
	return os.RemoveAll(dir)
}
