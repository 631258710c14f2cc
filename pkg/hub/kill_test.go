package hub_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeferry/ferry/internal/cli"
	"github.com/kubeferry/ferry/pkg/hub"
)

// childEnv, when set, makes the test binary run `ferry hub` with the
// arguments in it (space-separated) instead of the tests.
const childEnv = "FERRY_HUB_TEST_CHILD"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		os.Exit(cli.Main(strings.Fields(args), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// startHubProcess runs `ferry hub` on dir and port in a child process of
// the test binary; it is SIGKILLed (by its PID) at cleanup if still running.
func startHubProcess(t *testing.T, dir string, port int) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=hub --data-dir %s --bind-address 127.0.0.1 --secure-port %d", childEnv, dir, port))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// TestKillPersistence: a hub killed with SIGKILL starts again on its data
// directory with its Cluster and Migration (same UIDs and specs), and the
// admin token of the first start still works.
func TestKillPersistence(t *testing.T) {
	requireServers(t)
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	child := startHubProcess(t, dir, port)
	admin := waitKubeconfig(t, hub.AdminKubeconfig(dir))
	c := dynamicClient(t, admin)
	want := []*unstructured.Unstructured{create(t, c, clusterObj("old")), create(t, c, clusterObj("new"))}
	want = append(want, create(t, c, migrationV1beta1("killed", nil)))

	start := time.Now()
	if err := syscall.Kill(child.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	startHubProcess(t, dir, port)
	waitReady(t, admin) // the first start's token and CA
	t.Logf("ready again %s after SIGKILL", time.Since(start).Round(time.Millisecond))
	for _, w := range want {
		gvr := migrationsV1beta1
		if w.GetKind() == "Cluster" {
			gvr = clustersV1beta1
		}
		got, err := c.Resource(gvr).Namespace(ns).Get(context.Background(), w.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s %s after SIGKILL: %v", w.GetKind(), w.GetName(), err)
			continue
		}
		if got.GetUID() != w.GetUID() || !reflect.DeepEqual(got.Object["spec"], w.Object["spec"]) {
			t.Errorf("%s %s after SIGKILL: uid %s spec %v, want uid %s spec %v", w.GetKind(), w.GetName(), got.GetUID(), got.Object["spec"], w.GetUID(), w.Object["spec"])
		}
	}
}

// waitKubeconfig waits for the child's admin kubeconfig and its readyz.
func waitKubeconfig(t *testing.T, path string) *rest.Config {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err == nil {
			waitReady(t, cfg)
			return cfg
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin kubeconfig at %s: %v", path, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
