package migration

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/hooks"
)

// preHooks runs the pre-backup exec hooks (ferry's and Velero's pod
// annotations, as a backup reads them) of the running source pods in
// namespaces, before the cutover quiesces them: a database flushes or
// checkpoints while it still runs. A hook that fails with on-error Fail
// stops the cutover before anything is scaled, naming the pod and the
// command; one with Continue is logged. It returns how many ran.
func preHooks(ctx context.Context, o *Options, namespaces []string) (int, error) {
	ran := 0
	var failed []string
	for _, ns := range namespaces {
		pods, err := o.Source.Typed.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return ran, fmt.Errorf("listing the source's pods in %s for their pre hooks: %w", ns, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			pre, _, err := hooks.BackupHooks(p)
			if err != nil {
				return ran, fmt.Errorf("the pre hook of pod %s/%s cannot be read, so the cutover did not start: %w", ns, p.Name, err)
			}
			if pre == nil || p.Status.Phase != corev1.PodRunning {
				continue
			}
			res := hooks.Run(ctx, o.Source.Config, p, pre)
			ran++
			switch {
			case res.Err == nil:
				o.Log.Info("pre hook ran before the quiesce", "pod", res.Pod, "container", res.Container, "took", res.Duration)
			case pre.OnError == hooks.OnErrorContinue:
				o.Log.Warn("pre hook failed (on-error: Continue)", "pod", res.Pod, "error", res.Err)
			default:
				failed = append(failed, res.Err.Error())
			}
		}
	}
	if len(failed) > 0 {
		return ran, fmt.Errorf("pre hook failed (on-error: Fail), so nothing was quiesced: %s", strings.Join(failed, "; "))
	}
	return ran, nil
}
