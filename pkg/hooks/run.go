package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/pkg/kube"
)

// MaxOutput is how much of a hook's stdout and of its stderr a Result
// keeps: the first MaxOutput bytes of each.
const MaxOutput = 4 << 10

// Result is what running an exec hook did.
type Result struct {
	Pod       string // namespace/name
	Container string
	Command   []string
	Phase     string
	// Stdout and Stderr are the first MaxOutput bytes of each, and a note
	// of how many more there were.
	Stdout, Stderr string
	// Duration is how long the command ran; Waited how long RunAfterReady
	// waited for the container before.
	Duration, Waited time.Duration
	// Err is nil when the command ran and exited 0. It names the hook's
	// phase, pod, container and command; kube.ExitCode reads a non-zero
	// exit's code, and a hook that ran out of time is a
	// context.DeadlineExceeded ("timed out after 30s").
	Err error
}

// hookError is a hook's failure: where (phase, pod, container, command)
// and what, wrapping the cause.
type hookError struct {
	where, what string
	err         error
}

func (e *hookError) Error() string { return e.where + ": " + e.what }
func (e *hookError) Unwrap() error { return e.err }

func (r *Result) fail(err error, format string, a ...any) Result {
	where := fmt.Sprintf("%s hook in pod %s container %s, command %s", r.Phase, r.Pod, r.Container, commandJSON(r.Command))
	r.Err = &hookError{where: where, what: fmt.Sprintf(format, a...), err: err}
	return *r
}

// Run runs an exec hook in a pod that is Running, as its container's
// process (no shell unless the command names one), and waits at most
// h.Timeout (DefaultTimeout when 0) for it: a hook that takes longer is
// stopped by closing its exec stream and is an error "timed out after
// X" (the process in the container is not signalled). A pod that is not
// Running, a container the pod does not have, or a non-zero exit is an
// error of the hook; the error of a non-zero exit ends with the hook's
// stderr. Run does not read h.OnError: the caller decides.
func Run(ctx context.Context, cfg *rest.Config, pod *corev1.Pod, h *ExecHook) Result {
	var r Result
	if h != nil {
		r = Result{Container: h.Container, Command: h.Command, Phase: h.Phase}
	}
	if pod != nil {
		r.Pod = pod.Namespace + "/" + pod.Name
	}
	switch {
	case h == nil:
		return r.fail(nil, "no hook")
	case pod == nil:
		return r.fail(nil, "no pod")
	case len(h.Command) == 0:
		return r.fail(nil, "no command")
	case r.Container == "":
		if len(pod.Spec.Containers) == 0 {
			return r.fail(nil, "the pod has no containers")
		}
		r.Container = pod.Spec.Containers[0].Name
	}
	if !hasContainer(pod, r.Container) {
		return r.fail(nil, "the pod has no container %s", r.Container)
	}
	if pod.Status.Phase != corev1.PodRunning {
		return r.fail(nil, "the pod is %s, not Running", phaseOf(pod))
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr capped
	start := time.Now()
	err := kube.Exec(hctx, cfg, pod.Namespace, pod.Name, r.Container, nil, &stdout, &stderr, h.Command)
	r.Duration = time.Since(start)
	r.Stdout, r.Stderr = stdout.String(), stderr.String()
	if err == nil {
		return r
	}
	if errors.Is(hctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return r.fail(context.DeadlineExceeded, "timed out after %s", timeout)
	}
	if ctx.Err() != nil {
		return r.fail(ctx.Err(), "stopped: %v", ctx.Err())
	}
	what := err.Error()
	if code, ok := kube.ExitCode(err); ok {
		what = fmt.Sprintf("exit code %d", code)
	}
	if s := strings.TrimSpace(r.Stderr); s != "" {
		what += ": " + s
	}
	return r.fail(err, "%s", what)
}

// commandJSON prints a command as a JSON array, as its annotation has it
// (without json.Marshal's \u003e for '>').
func commandJSON(cmd []string) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(cmd)
	return strings.TrimSuffix(b.String(), "\n")
}

// hasContainer says whether the pod has the container, or a sidecar (an
// init container that restarts Always) of that name, as Velero allows.
func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return true
		}
	}
	return false
}

func phaseOf(pod *corev1.Pod) string {
	if pod.Status.Phase == "" {
		return "in no phase yet"
	}
	return string(pod.Status.Phase)
}

// capped keeps the first MaxOutput bytes written to it and counts the
// rest. Locked: a stream's copy may still write after Exec returned.
type capped struct {
	mu      sync.Mutex
	b       []byte
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(p), MaxOutput-len(c.b))
	c.b = append(c.b, p[:n]...)
	c.dropped += len(p) - n
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped > 0 {
		return fmt.Sprintf("%s\n[ferry: %d more bytes not kept]", c.b, c.dropped)
	}
	return string(c.b)
}
