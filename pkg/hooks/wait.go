package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// errNotUp ends a wait: the pod will not run the hook's container.
var errNotUp = errors.New("will not run")

// RunAfterReady waits until the hook's container in pod namespace/name is
// running, and Ready too when h.WaitForReady (the container's Ready, as
// Velero checks), then runs the hook as Run does. The wait, by watching
// the pod, is bounded by h.WaitTimeout when it is set and by ctx: a
// container not up in time, a pod that is deleted or ends (Succeeded,
// Failed) first, or a container the pod does not have is an error of the
// hook that says what was last seen. An empty h.Container is the pod's
// first container.
func RunAfterReady(ctx context.Context, cfg *rest.Config, client kubernetes.Interface, namespace, name string, h *ExecHook) Result {
	r := Result{Pod: namespace + "/" + name}
	if h == nil {
		return r.fail(nil, "no hook")
	}
	r.Container, r.Command, r.Phase = h.Container, h.Command, h.Phase
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if h.WaitTimeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, h.WaitTimeout)
	}
	defer cancel()
	start := time.Now()
	pod, last, err := waitUp(wctx, client, namespace, name, h)
	r.Waited = time.Since(start)
	if err != nil {
		if c := containerOf(last, h); c != "" {
			r.Container = c
		}
		state := "the pod was not seen"
		if last != nil {
			state = describe(last, r.Container)
		}
		switch {
		case errors.Is(err, errNotUp):
			return r.fail(err, "%v (%s)", err, state)
		case ctx.Err() != nil:
			return r.fail(ctx.Err(), "not run: %v while waiting for the container (%s)", ctx.Err(), state)
		case wctx.Err() != nil:
			return r.fail(context.DeadlineExceeded, "container not %s after wait-timeout %s: %s", upWord(h), h.WaitTimeout, state)
		default:
			return r.fail(err, "waiting for the container: %v (%s)", err, state)
		}
	}
	res := Run(ctx, cfg, pod, h)
	res.Waited = r.Waited
	return res
}

// waitUp watches the pod until the hook's container is up; it returns
// the pod then, and the pod as last seen either way.
func waitUp(ctx context.Context, client kubernetes.Interface, namespace, name string, h *ExecHook) (up, last *corev1.Pod, err error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	pods := client.CoreV1().Pods(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return pods.Watch(ctx, o)
		},
	}
	ev, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, nil, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		last = p
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("%w: the pod was deleted", errNotUp)
		}
		return isUp(p, containerOf(p, h), h.WaitForReady)
	})
	if err != nil {
		return nil, last, err
	}
	return ev.Object.(*corev1.Pod), last, nil
}

// isUp says whether the pod is Running and the container running (and
// Ready when ready), and fails when it never will be.
func isUp(p *corev1.Pod, container string, ready bool) (bool, error) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false, fmt.Errorf("%w: the pod ended (%s) before the hook ran", errNotUp, p.Status.Phase)
	}
	if container == "" || !hasContainer(p, container) {
		return false, fmt.Errorf("%w: the pod has no container %s", errNotUp, container)
	}
	for _, cs := range append(p.Status.ContainerStatuses, p.Status.InitContainerStatuses...) {
		if cs.Name == container {
			running := cs.State.Running != nil && p.Status.Phase == corev1.PodRunning
			return running && (!ready || cs.Ready), nil
		}
	}
	return false, nil
}

// containerOf is the hook's container in p: h.Container, or p's first.
func containerOf(p *corev1.Pod, h *ExecHook) string {
	if h.Container != "" || p == nil || len(p.Spec.Containers) == 0 {
		return h.Container
	}
	return p.Spec.Containers[0].Name
}

func upWord(h *ExecHook) string {
	if h.WaitForReady {
		return "Ready"
	}
	return "running"
}

// describe says how the pod and the container were last seen.
func describe(p *corev1.Pod, container string) string {
	s := "pod " + phaseOf(p)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		switch {
		case cs.State.Running != nil:
			s += fmt.Sprintf(", container %s running, ready=%t", container, cs.Ready)
		case cs.State.Waiting != nil:
			s += strings.TrimSpace(fmt.Sprintf(", container %s waiting: %s %s", container, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			s += fmt.Sprintf(", container %s terminated: %s exit code %d", container, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
	}
	return s
}
