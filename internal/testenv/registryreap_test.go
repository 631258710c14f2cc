package testenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReapStaleRegistry starts a registry in a child test process,
// SIGKILLs that process (so its cleanup never runs, as when a test
// panics), and checks that the next process's first registry start stops
// the orphaned registry and removes its directory, while a live process's
// registry is left alone.
func TestReapStaleRegistry(t *testing.T) {
	if os.Getenv("FERRY_TESTENV_REGISTRY_CHILD") == "1" {
		r, err := StartRegistry(context.Background(), nil, RegistryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("READY %d %s\n", r.cmd.Process.Pid, r.tmp)
		time.Sleep(10 * time.Minute)
		return
	}
	if testing.Short() {
		t.Skip("starts docker-registry")
	}
	live, err := StartRegistry(context.Background(), t, RegistryOptions{}) // this process's: alive
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(self, "-test.run", "^TestReapStaleRegistry$")
	child.Env = append(os.Environ(), "FERRY_TESTENV_REGISTRY_CHILD=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "READY" {
				ready <- f[1:]
				return
			}
		}
		close(ready)
	}()
	var f []string
	select {
	case f = <-ready:
	case <-time.After(time.Minute):
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	if len(f) != 2 {
		t.Fatal("the child started no registry")
	}
	pid, _ := strconv.Atoi(f[0])
	dir := f[1]
	if !processAlive(pid) {
		t.Fatalf("the killed child's registry %d is gone already: nothing to test", pid)
	}
	if got := registryOwner(dir); got != child.Process.Pid {
		t.Fatalf("registry directory %s names owner %d, want the child %d", dir, got, child.Process.Pid)
	}
	reapRegistriesOnce = sync.Once{} // as in the next process
	reapStaleRegistries()
	if processAlive(pid) {
		t.Errorf("the orphaned registry %d still runs", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("its directory %s: %v, want removed", dir, err)
	}
	if !processAlive(live.cmd.Process.Pid) {
		t.Errorf("this process's own registry was stopped")
	}
	if _, err := os.Stat(live.tmp); err != nil {
		t.Errorf("this process's own registry directory: %v", err)
	}
}
