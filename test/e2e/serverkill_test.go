package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/servermode"
)

// startServer runs the ferry server binary against kubeconfig; stop
// SIGTERMs it, kill SIGKILLs it.
type serverProc struct {
	cmd *exec.Cmd
	log bytes.Buffer
}

func startServer(t *testing.T, kubeconfig string) *serverProc {
	t.Helper()
	p := &serverProc{}
	p.cmd = exec.Command(ferryBin, "server", "--kubeconfig", kubeconfig, "--metrics-addr", "0", "--probe-addr", "0",
		"--sync-period", "1s", "--location-validation-period", "1s", "--leader-elect-lease-duration", "3s")
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("server log:\n%s", p.log.String())
		}
	})
	return p
}

func (p *serverProc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// TestServerKilled SIGKILLs the ferry server binary while a backup's
// archive upload is held: the Backup stays InProgress (nothing is written
// by a killed process); the next server, once it holds the Lease, marks
// it Failed with the reason, and a new backup completes.
func TestServerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx := context.Background()
	c, s3, creds := serverSetup(t, "kill")
	proxy, err := testenv.StartHoldProxy(t, s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(s3.URL("ferry"), s3.Endpoint, proxy.Endpoint, 1)
	if r := ferry(t, nil, "install", "--apply", "--no-node-agent", "--location-url", url, "--credentials-file", creds, "--kubeconfig", c.KubeconfigPath); r.code != 0 {
		t.Fatalf("install: %s", r.stderr)
	}
	cl, err := crclient.New(c.Config, crclient.Options{Scheme: servermode.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) *v1alpha1.Backup {
		b := &v1alpha1.Backup{}
		if err := cl.Get(ctx, crclient.ObjectKey{Namespace: "ferry", Name: name}, b); err != nil {
			t.Fatal(err)
		}
		return b
	}

	first := startServer(t, c.KubeconfigPath)
	proxy.Hold(".tar.gz")
	if r := ferry(t, nil, "backup", "create", "killed", "--server", "--kubeconfig", c.KubeconfigPath); r.code != 0 {
		t.Fatalf("backup create: %s", r.stderr)
	}
	select {
	case <-proxy.Arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the archive upload never started")
	}
	if b := get("killed"); b.Status.Phase != v1alpha1.PhaseInProgress {
		t.Fatalf("before the kill: %s", b.Status.Phase)
	}
	first.kill()
	proxy.Release()
	if b := get("killed"); b.Status.Phase != v1alpha1.PhaseInProgress {
		t.Fatalf("after the kill: %s", b.Status.Phase)
	}

	startServer(t, c.KubeconfigPath)
	poll(t, 30*time.Second, "killed backup Failed", func() error {
		if b := get("killed"); b.Status.Phase != v1alpha1.PhaseFailed || !strings.Contains(b.Status.FailureReason, "stopped before it finished") {
			return fmt.Errorf("phase %s: %q", b.Status.Phase, b.Status.FailureReason)
		}
		return nil
	})
	r := ferry(t, nil, "backup", "create", "after", "--server", "--wait", "--kubeconfig", c.KubeconfigPath)
	if r.code != 0 || !strings.Contains(r.stdout, "Backup after: Completed") {
		t.Fatalf("backup after the restart: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
