package cli

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeferry/ferry/pkg/hub"
	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// childEnv, when set, makes the test binary run ferry with the arguments
// in it (space-separated) instead of the tests: a ferry hub to SIGKILL.
const childEnv = "FERRY_CLI_TEST_CHILD"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		os.Exit(Main(strings.Fields(args), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// startHubChild runs `ferry hub` on dir and port in a child process of the
// test binary, without controllers (the test writes the status as they
// would), and waits until it is ready; it is SIGKILLed (by its PID)
// at cleanup if still running.
func startHubChild(t *testing.T, dir string, port int) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=hub --data-dir %s --bind-address 127.0.0.1 --secure-port %d --controllers=false", childEnv, dir, port))
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	kc := hub.AdminKubeconfig(dir)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(kc); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", kc)
		}
	}
	waitHubReady(t, kc)
	return cmd
}

// TestHubMigrateWaitKilledHub: migrate --hub --wait follows its Migration
// across a ferry hub SIGKILLed and started again on its data directory.
func TestHubMigrateWaitKilledHub(t *testing.T) {
	cleanEnv(t)
	requireHubServers(t)
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	child := startHubChild(t, dir, port)
	kubeconfig := hub.AdminKubeconfig(dir)
	c, err := hubClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := writeMemberKubeconfig(t)
	for _, name := range []string{"src", "dst"} {
		if code, _, stderr := ferry("hub", "cluster", "add", name, "--kubeconfig", kc, "--context", "token", "--hub", kubeconfig); code != 0 {
			t.Fatalf("cluster add %s: %s", name, stderr)
		}
	}
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"migrate", "--hub", kubeconfig, "--from-cluster", "src", "--to-cluster", "dst", "--storage", "file:///data",
			"--name", "killed", "--wait", "--wait-timeout", "2m"}, &stdout, &stderr)
	}()
	waitOutput(t, &stderr, "migration killed: Pending\n", done)
	setStatus(t, c, "killed", hubv1beta1.MigrationStatus{Phase: hubv1beta1.PhaseBackup})
	waitOutput(t, &stderr, "migration killed: Backup\n", done)
	if err := syscall.Kill(child.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	time.Sleep(time.Second) // the wait retries while the hub is down
	startHubChild(t, dir, port)
	setStatus(t, c, "killed", hubv1beta1.MigrationStatus{Phase: hubv1beta1.PhaseRestore})
	waitOutput(t, &stderr, "migration killed: Restore\n", done)
	setStatus(t, c, "killed", hubv1beta1.MigrationStatus{Phase: hubv1beta1.PhaseCompleted, Counts: hubv1beta1.MigrationCounts{BackedUp: 3, Restored: 3}})
	select {
	case code := <-done:
		if want := "Migration killed Completed: 3 backed up, 3 restored, 0 skipped, 0 failed\n"; code != 0 || stdout.String() != want {
			t.Errorf("exit %d, stdout %q, stderr %q; want 0, %q", code, stdout.String(), stderr.String(), want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("migrate --wait still running; stderr %q", stderr.String())
	}
}
