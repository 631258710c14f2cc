package backup

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeferry/ferry/pkg/hooks"
)

// podHook is one archived pod's backup hooks.
type podHook struct {
	pod       *corev1.Pod
	pre, post *hooks.ExecHook
}

// backupHooks reads the backup hooks of the archived pods that run (pkg/hooks:
// ferry's and Velero's pod annotations). A hook annotation that cannot be
// read is returned (all of them, joined), naming the pod: the hook it
// describes (a flush, a lock) cannot run, so the backup fails rather than
// copy data the hook was to make consistent.
func (r *run) backupHooks() ([]podHook, error) {
	var out []podHook
	var bad []string
	for i := range r.pods.pods {
		p := &r.pods.pods[i]
		pre, post, err := hooks.BackupHooks(p)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		if pre == nil && post == nil {
			continue
		}
		if p.Status.Phase != corev1.PodRunning {
			r.results.Warnf("pod %s/%s is %s: its backup hooks are not run", p.Namespace, p.Name, p.Status.Phase)
			continue
		}
		out = append(out, podHook{pod: p, pre: pre, post: post})
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return out, nil
}

// runHooks runs the hooks of phase (pre or post) of each pod, in order.
// A failed hook whose on-error is Continue is a warning; one that is Fail
// is returned (all of them, joined), and then the backup fails. Each
// failure names the pod, container and command.
func (r *run) runHooks(hs []podHook, pre bool) error {
	var failed []string
	for _, h := range hs {
		hook := h.post
		if pre {
			hook = h.pre
		}
		if hook == nil {
			continue
		}
		res := hooks.Run(r.ctx, r.cluster.Config, h.pod, hook)
		r.hooksAttempted.Add(1)
		if res.Err == nil {
			r.opts.Log.Info("backup hook ran", "phase", hook.Phase, "pod", res.Pod, "container", res.Container, "took", res.Duration)
			// The program only: a hook's arguments may hold a credential.
			r.results.Notef("%s hook ran in pod %s, container %s: %s (exit 0, %s)", hook.Phase, res.Pod, res.Container, program(res.Command), res.Duration.Round(time.Millisecond))
			continue
		}
		r.hooksFailed.Add(1)
		msg := res.Err.Error()
		if res.Stderr != "" && !strings.Contains(msg, strings.TrimSpace(res.Stderr)) {
			msg += " (stderr: " + strings.TrimSpace(res.Stderr) + ")"
		}
		if hook.OnError == hooks.OnErrorContinue {
			r.results.Warnf("%s (on-error: Continue)", msg)
			continue
		}
		failed = append(failed, msg)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	return nil
}

// program is the program a hook's command runs (its first word), for
// notes that must not print the arguments.
func program(cmd []string) string {
	if len(cmd) == 0 || len(strings.Fields(cmd[0])) == 0 {
		return "(no command)"
	}
	return strings.Fields(cmd[0])[0] + " ..."
}
