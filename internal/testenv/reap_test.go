package testenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReapAfterKill starts a cluster with a node in a child test run under
// its own hack/netns-exec.sh, SIGKILLs that run in the middle (the script
// and the test binary, by PID), and checks that the next start's cleanup
// leaves nothing of it: no processes, mounts, cgroups, network namespace or
// directory.
func TestReapAfterKill(t *testing.T) {
	if os.Getenv("FERRY_TESTENV_REAP_CHILD") == "1" {
		reapChild(t)
		return
	}
	if testing.Short() {
		t.Skip("starts a cluster with a node")
	}
	if _, err := netnsPrefix(); err != nil {
		t.Fatal(err)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", "netns-exec.sh"), self, "-test.run", "^TestReapAfterKill$", "-test.v")
	cmd.Env = append(os.Environ(), "FERRY_TESTENV_REAP_CHILD=1")
	cmd.Dir = "."
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	name := waitChildReady(t, out)
	script := cmd.Process.Pid
	for _, pid := range childPIDs(script) { // the test binary (nsenter exec'd it)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if !strings.HasPrefix(name, fmt.Sprintf("ferry-test-%d-n", script)) {
		t.Fatalf("child's cluster namespace %q is not named after its script (pid %d)", name, script)
	}
	dir := filepath.Join(nodeBase, name)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the killed run left no %s to clean (was it killed too late?): %v", dir, err)
	}
	if len(cgroupPIDs("/"+name)) == 0 {
		t.Fatalf("the killed run left no pod processes in its cgroups: nothing to test")
	}
	reapStale()
	// The next run's hack/netns-exec.sh does the rest: the processes left
	// in the killed run's own namespace (its registry) and its TMPDIR.
	childTmp := filepath.Join(os.TempDir(), fmt.Sprintf("ferry-test-%d.tmp", script))
	if _, err := os.Stat(childTmp); err != nil {
		t.Fatalf("the killed run left no TMPDIR %s: %v", childTmp, err)
	}
	testNS := fmt.Sprintf("ferry-test-%d", script)
	if len(netnsPIDs(testNS)) == 0 {
		t.Fatalf("the killed run left no processes in %s (its registry): nothing to test", testNS)
	}
	next := exec.Command(filepath.Join(root, "hack", "netns-exec.sh"), "true")
	if out, err := next.CombinedOutput(); err != nil {
		t.Fatalf("the next run: %v: %s", err, out)
	}
	if pids := netnsPIDs(testNS); len(pids) > 0 {
		t.Errorf("processes left in %s: %v", testNS, pids)
	}
	for _, p := range []string{childTmp, "/run/netns/" + testNS} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after the next run", p)
		}
	}
	if pids := append(cgroupPIDs("/"+name), netnsPIDs(name)...); len(pids) > 0 {
		t.Errorf("processes left after cleanup: %v", pids)
	}
	if m := mountsUnder(dir); len(m) > 0 {
		t.Errorf("mounts left after cleanup: %v", m)
	}
	for _, p := range append([]string{dir, "/run/netns/" + name}, cgroupDirs(name)...) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after cleanup", p)
		}
	}
}

// reapChild is the child run: a cluster with a node and a running pod,
// then it prints its namespace and waits to be killed.
func reapChild(t *testing.T) {
	ctx := context.Background()
	reg, err := StartRegistry(ctx, nil, RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := StartNodeClusters(ctx, nil, reg, "victim")
	if err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	k := mustClient(t, c)
	if _, err := k.CoreV1().Pods("default").Create(ctx, sleeper("victim", reg.NodeHost+"/"+BusyboxImage), createOpts); err != nil {
		t.Fatal(err)
	}
	waitPodRunning(ctx, t, k, "default", "victim")
	fmt.Printf("READY %s\n", c.Node.Netns)
	time.Sleep(10 * time.Minute)
}

func waitChildReady(t *testing.T, out interface{ Read([]byte) (int, error) }) string {
	t.Helper()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "READY" {
				lines <- f[1]
				return
			}
		}
		close(lines)
	}()
	select {
	case name, ok := <-lines:
		if !ok {
			t.Fatal("the child run ended before its cluster was ready")
		}
		return name
	case <-time.After(4 * time.Minute):
		t.Fatal("the child run's cluster not ready after 4m")
	}
	return ""
}

// childPIDs lists pid's children.
func childPIDs(pid int) []int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

func cgroupDirs(name string) []string {
	var dirs []string
	for _, h := range cgroupHierarchies() {
		dirs = append(dirs, filepath.Join(h, name))
	}
	return dirs
}
