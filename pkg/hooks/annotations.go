// Package hooks owns the noun "hook": commands a backup or restore runs in
// the containers of pods, and init containers a restore adds to them, as
// the pods' annotations ask in Velero's format (vmware-tanzu/velero
// internal/hook and pkg/podexec; docs "Backup Hooks" and "Restore Hooks"),
// under Velero's prefixes or ferry's own:
//
//	pre.hook.backup.velero.io/   pre.hook.backup.ferry.dev/    exec before a pod is backed up
//	post.hook.backup.velero.io/  post.hook.backup.ferry.dev/   exec after it is backed up
//	hook.backup.velero.io/                                     Velero's legacy pre hook
//	post.hook.restore.velero.io/ post.hook.restore.ferry.dev/  exec once a restored pod runs
//	init.hook.restore.velero.io/ init.hook.restore.ferry.dev/  init container of a restored pod
//
// A hook exists when its command annotation is set (for an init container,
// container-image). When a pod has a hook of the same phase under both
// prefixes, ferry's wins whole: none of the Velero hook's annotations are
// read, not even those ferry's leaves out. Backup exec hooks take
// container (default the pod's first container), command, on-error (Fail,
// the default, or Continue) and timeout (a Go duration, default 30s).
// Post-restore exec hooks take container, command, on-error (default
// Continue), exec-timeout (default 30s), wait-timeout (default none: wait
// as long as the caller's context allows) and wait-for-ready (default
// false). Init-container hooks take container-image, container-name
// (default ferry-restore-init) and command (default the image's
// entrypoint).
//
// A command is a JSON array of strings when it starts with '[', else one
// string that is the whole command (not run by a shell). Unlike Velero,
// which logs and goes on with a default, a value ferry cannot read is an
// error that names the annotation.
package hooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Annotation prefixes, Velero's and ferry's. A key is a prefix and a
// suffix below, e.g. pre.hook.backup.velero.io/command.
const (
	VeleroPreBackup    = "pre.hook.backup.velero.io/"
	VeleroPostBackup   = "post.hook.backup.velero.io/"
	VeleroLegacyBackup = "hook.backup.velero.io/"
	VeleroPostRestore  = "post.hook.restore.velero.io/"
	VeleroInitRestore  = "init.hook.restore.velero.io/"

	FerryPreBackup   = "pre.hook.backup.ferry.dev/"
	FerryPostBackup  = "post.hook.backup.ferry.dev/"
	FerryPostRestore = "post.hook.restore.ferry.dev/"
	FerryInitRestore = "init.hook.restore.ferry.dev/"
)

// Annotation suffixes.
const (
	KeyContainer      = "container"
	KeyCommand        = "command"
	KeyOnError        = "on-error"
	KeyTimeout        = "timeout"      // backup hooks
	KeyExecTimeout    = "exec-timeout" // post-restore hooks
	KeyWaitTimeout    = "wait-timeout"
	KeyWaitForReady   = "wait-for-ready"
	KeyContainerImage = "container-image" // init-container hooks
	KeyContainerName  = "container-name"
)

// Phases of exec hooks.
const (
	PhasePreBackup   = "pre-backup"
	PhasePostBackup  = "post-backup"
	PhasePostRestore = "post-restore"
)

// What a failed hook does to the backup or restore (Velero's HookErrorMode).
const (
	OnErrorFail     = "Fail"
	OnErrorContinue = "Continue"
)

// DefaultTimeout is how long an exec hook may run when its annotations do
// not say (Velero's pkg/podexec defaultTimeout).
const DefaultTimeout = 30 * time.Second

// DefaultInitContainerName names an init-container hook without a
// container-name. Velero makes up velero-restore-init-<random>; a fixed
// name keeps InjectInitContainer idempotent.
const DefaultInitContainerName = "ferry-restore-init"

// ExecHook is a command to run in a container of a pod.
type ExecHook struct {
	// Phase is PhasePreBackup, PhasePostBackup or PhasePostRestore.
	Phase     string
	Container string
	Command   []string
	// OnError is OnErrorFail or OnErrorContinue: whether the hook's
	// failure fails the backup or restore. Run itself does not read it.
	OnError string
	// Timeout bounds the command's run (0: DefaultTimeout).
	Timeout time.Duration
	// Source is the annotation prefix the hook came from.
	Source string
	// WaitTimeout bounds RunAfterReady's wait for the container (0: no
	// bound but the context's); post-restore hooks only.
	WaitTimeout time.Duration
	// WaitForReady makes RunAfterReady wait until the container is Ready,
	// not only running; post-restore hooks only.
	WaitForReady bool
}

// BackupHooks reads a pod's pre- and post-backup exec hooks; each is nil
// when the pod has none. Velero's unphased hook.backup.velero.io/ keys are
// a pre hook when no pre hook is set under a phased prefix. Any annotation
// that cannot be read is an error, and then no hook is returned.
func BackupHooks(pod *corev1.Pod) (pre, post *ExecHook, err error) {
	if pod == nil {
		return nil, nil, errors.New("hooks: no pod")
	}
	pre, errPre := execHook(pod, PhasePreBackup, KeyTimeout, OnErrorFail, FerryPreBackup, VeleroPreBackup, VeleroLegacyBackup)
	post, errPost := execHook(pod, PhasePostBackup, KeyTimeout, OnErrorFail, FerryPostBackup, VeleroPostBackup)
	if err := errors.Join(errPre, errPost); err != nil {
		return nil, nil, err
	}
	return pre, post, nil
}

// RestoreHook reads a pod's post-restore exec hook: nil when it has none.
func RestoreHook(pod *corev1.Pod) (*ExecHook, error) {
	if pod == nil {
		return nil, errors.New("hooks: no pod")
	}
	h, err := execHook(pod, PhasePostRestore, KeyExecTimeout, OnErrorContinue, FerryPostRestore, VeleroPostRestore)
	if err != nil || h == nil {
		return nil, err
	}
	ann := pod.Annotations
	if h.WaitTimeout, err = duration(ann, h.Source+KeyWaitTimeout); err != nil {
		return nil, podErr(pod, err)
	}
	if v, ok := ann[h.Source+KeyWaitForReady]; ok {
		if h.WaitForReady, err = strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			return nil, podErr(pod, fmt.Errorf("annotation %s: %q is not true or false", h.Source+KeyWaitForReady, v))
		}
	}
	return h, nil
}

// execHook reads the exec hook of the first prefix whose command is set.
func execHook(pod *corev1.Pod, phase, timeoutKey, defaultOnError string, prefixes ...string) (*ExecHook, error) {
	ann := pod.Annotations
	var p string
	for _, c := range prefixes {
		if strings.TrimSpace(ann[c+KeyCommand]) != "" {
			p = c
			break
		}
	}
	if p == "" {
		return nil, nil
	}
	cmd, err := parseCommand(p+KeyCommand, ann[p+KeyCommand])
	if err != nil {
		return nil, podErr(pod, err)
	}
	h := &ExecHook{Phase: phase, Command: cmd, Source: p, OnError: defaultOnError, Timeout: DefaultTimeout}
	if h.Container = strings.TrimSpace(ann[p+KeyContainer]); h.Container == "" {
		if len(pod.Spec.Containers) == 0 {
			return nil, podErr(pod, fmt.Errorf("%s hook (%s): the pod has no containers", phase, p+KeyCommand))
		}
		h.Container = pod.Spec.Containers[0].Name
	}
	switch v := strings.TrimSpace(ann[p+KeyOnError]); v {
	case "":
	case OnErrorFail, OnErrorContinue:
		h.OnError = v
	default:
		return nil, podErr(pod, fmt.Errorf("annotation %s: %q is neither %s nor %s", p+KeyOnError, v, OnErrorFail, OnErrorContinue))
	}
	t, err := duration(ann, p+timeoutKey)
	if err != nil {
		return nil, podErr(pod, err)
	}
	if t > 0 {
		h.Timeout = t
	}
	return h, nil
}

// parseCommand reads a command annotation as Velero does: a JSON array of
// strings when it starts with '[', else a one-element command (without
// leading or trailing white space).
func parseCommand(key, v string) ([]string, error) {
	s := strings.TrimSpace(v)
	if !strings.HasPrefix(s, "[") {
		return []string{s}, nil
	}
	var cmd []string
	if err := json.Unmarshal([]byte(s), &cmd); err != nil {
		return nil, fmt.Errorf("annotation %s: starts with '[' but is not a JSON array of strings: %v", key, err)
	}
	if len(cmd) == 0 || cmd[0] == "" {
		return nil, fmt.Errorf("annotation %s: empty command %s", key, s)
	}
	return cmd, nil
}

// duration reads a Go duration annotation: 0 when it is not set.
func duration(ann map[string]string, key string) (time.Duration, error) {
	v := strings.TrimSpace(ann[key])
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("annotation %s: %q is not a duration such as 30s or 5m", key, v)
	}
	if d < 0 {
		return 0, fmt.Errorf("annotation %s: negative duration %s", key, v)
	}
	return d, nil
}

func podErr(pod *corev1.Pod, err error) error {
	return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
}
