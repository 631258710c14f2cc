package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// daemon is a running process of a test cluster (kube-controller-manager,
// and on a node containerd, kubelet, kube-scheduler, kube-proxy). done is
// closed when the process has exited; err then holds its exit status.
type daemon struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{}
	err     error
}

// kcmArgs returns kube-controller-manager's flags for cluster c. The service
// account key and root CA make the token controller and the root-ca
// publisher (ConfigMap kube-root-ca.crt) work; with --secure-port=0 KCM
// serves nothing and needs no authn/authz kubeconfigs.
func kcmArgs(c *Cluster) []string {
	args := []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=*",
		"--service-account-private-key-file=" + filepath.Join(c.CertDir, "sa-signer.key"),
		"--root-ca-file=" + c.CAFile,
		"--use-service-account-credentials=false",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}
	if c.Node != nil {
		args = append(args, "--enable-hostpath-provisioner")
	}
	return args
}

// startKCM starts kube-controller-manager for c, logging to c.KCMLogPath,
// in the node's network namespace if c has a node.
func startKCM(bin string, c *Cluster) (*daemon, error) {
	path, err := kcmBinary(bin)
	if err != nil {
		return nil, err
	}
	argv := append([]string{path}, kcmArgs(c)...)
	if c.Node != nil {
		argv = c.Node.net.nsenter(argv...)
	}
	return startDaemon("kube-controller-manager", c.KCMLogPath, c.Dir, argv, nil)
}

// startDaemon starts argv with its output in logPath and env added to the
// environment.
func startDaemon(name, logPath, dir string, argv, env []string) (*daemon, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &daemon{name: name, logPath: logPath, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *daemon) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
// An exit caused by our signal is not an error.
func (p *daemon) stop(grace time.Duration) error {
	defer p.log.Close()
	if p.exited() {
		return nil // it already died; startup reported that if it mattered
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// waitDefaultServiceAccount polls until ServiceAccount default/default
// exists. It fails early if KCM exits, and after timeout or when ctx ends.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			lastErr = err
		}
		if c.kcm.exited() {
			return fmt.Errorf("kube-controller-manager exited (%v) before creating ServiceAccount default/default; log %s ends:\n%s",
				c.kcm.err, c.KCMLogPath, tailFile(c.KCMLogPath, 30))
		}
		select {
		case <-ctx.Done():
			cause := ctx.Err()
			if errors.Is(cause, context.DeadlineExceeded) {
				cause = fmt.Errorf("timed out after %s", timeout)
			}
			return fmt.Errorf("ServiceAccount default/default (made by kube-controller-manager) not there: %w (last API error: %v); KCM log %s ends:\n%s",
				cause, lastErr, c.KCMLogPath, tailFile(c.KCMLogPath, 30))
		case <-tick.C:
		}
	}
}

// tailFile returns the last n lines of a file, or a note why it cannot.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
