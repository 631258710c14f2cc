package migration

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/hooks"
)

// runHook runs an exec hook in a pod (hooks.Run; unit tests replace it).
var runHook = hooks.Run

// quiescedPod says whether the quiesce stops pod p: a pod of a ReplicaSet
// or a StatefulSet (the pods podsGone waits for). Bare pods, DaemonSets'
// and Jobs' keep running.
func quiescedPod(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && (ref.Kind == "ReplicaSet" || ref.Kind == "StatefulSet") && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// preHooks runs the pre-backup exec hooks (ferry's and Velero's pod
// annotations, as a backup reads them) of the running source pods in
// namespaces that the quiesce will stop: a database flushes or
// checkpoints while it still runs. The pods that keep running get their
// hooks from the final backup, around its snapshot of them, as in any
// backup. A hook that fails with on-error Fail stops the cutover before
// anything is scaled, naming the pod and the command, and the pods whose
// pre hook ran get their post hook; one with Continue is logged. It
// returns the pods whose pre hook ran.
func preHooks(ctx context.Context, o *Options, namespaces []string) ([]*corev1.Pod, error) {
	var ran []*corev1.Pod
	var failed []string
	for _, ns := range namespaces {
		pods, err := o.Source.Typed.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			postHooks(ctx, o, ran)
			return nil, fmt.Errorf("listing the source's pods in %s for their pre hooks: %w", ns, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if !quiescedPod(p) || p.Status.Phase != corev1.PodRunning {
				continue
			}
			pre, _, err := hooks.BackupHooks(p)
			if err != nil {
				postHooks(ctx, o, ran)
				return nil, fmt.Errorf("the pre hook of pod %s/%s cannot be read, so the cutover did not start: %w", ns, p.Name, err)
			}
			if pre == nil {
				continue
			}
			res := runHook(ctx, o.Source.Config, p, pre)
			switch {
			case res.Err == nil:
				ran = append(ran, p)
				o.Log.Info("pre hook ran before the quiesce", "pod", res.Pod, "container", res.Container, "took", res.Duration)
			case pre.OnError == hooks.OnErrorContinue:
				ran = append(ran, p) // it may have done part of its work
				o.Log.Warn("pre hook failed (on-error: Continue)", "pod", res.Pod, "error", res.Err)
			default:
				failed = append(failed, res.Err.Error())
			}
		}
	}
	if len(failed) > 0 {
		postHooks(ctx, o, ran)
		return nil, fmt.Errorf("pre hook failed (on-error: Fail), so nothing was quiesced: %s", strings.Join(failed, "; "))
	}
	return ran, nil
}

// postHooks runs the post-backup exec hooks of the pods whose pre hook
// ran, when the quiesce stops short of stopping them: a database frozen
// by its pre hook is thawed. Best effort, with its own deadline: a pod
// that is gone is skipped, a failure is logged.
func postHooks(ctx context.Context, o *Options, pods []*corev1.Pod) {
	if len(pods) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	for _, was := range pods {
		p, err := o.Source.Typed.CoreV1().Pods(was.Namespace).Get(ctx, was.Name, metav1.GetOptions{})
		if err != nil || p.UID != was.UID || p.Status.Phase != corev1.PodRunning {
			continue // gone, or another pod of that name
		}
		_, post, err := hooks.BackupHooks(p)
		if err != nil || post == nil {
			continue
		}
		if res := runHook(ctx, o.Source.Config, p, post); res.Err != nil {
			o.Log.Warn("post hook after a quiesce that stopped short failed", "pod", res.Pod, "error", res.Err)
		} else {
			o.Log.Info("post hook ran: the quiesce stopped short", "pod", res.Pod)
		}
	}
}
