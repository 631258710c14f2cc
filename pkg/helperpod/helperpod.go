// Package helperpod owns ferry's helper pods: short-lived pods, running
// ferry's own image, that a backup or restore starts in a cluster to do
// work that needs a node (reading or writing a claim's data) when nothing
// of ferry is installed there. All of their code is here:
//   - running one pod (Run.Pod, Spec): its Secret, its outcome in the
//     termination message, its progress as JSON lines on stdout, its
//     removal when its work ends, and the run's clean-up (Sweep);
//   - the volume helpers (Helpers): a pod per claim or volume that backs it
//     up or restores it, built by one factory (New, from Settings) for the
//     CLI, server mode and the hub, with the pod volume options of a backup
//     or restore through them (BackupOptions, RestoreOptions);
//   - the job such a pod runs inside it (Job, RunJob, `ferry volume-helper`).
//
// Every object a run creates carries the labels LabelManagedBy and LabelRun
// and a Lease (LeaseName) that the run renews while it lives. A run that is
// killed stops renewing it: the next run (Sweep) deletes the helper pods
// and Secrets of every run whose lease has expired. The kopia repository
// the jobs read and write is pkg/volumes'.
package helperpod

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// Labels and annotations of the objects a run creates.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "ferry"
	// LabelRun names the run (Run.ID) that created the object.
	LabelRun = v1alpha1.LabelHelperRun
	// LabelPurpose says what the helper pod does ("volume-backup", ...).
	LabelPurpose = "ferry.dev/helper"
	// AnnotationTarget names what the helper pod works on (a claim).
	AnnotationTarget = "ferry.dev/helper-target"
	// ContainerName is the helper pod's one container.
	ContainerName = "ferry"
	// TerminationMessagePath is where the helper writes its outcome.
	TerminationMessagePath = "/dev/termination-log"
)

// Spec is one helper pod to run.
type Spec struct {
	// Namespace is where the pod and its Secret are created (the claim's).
	Namespace string
	// Purpose labels the pod (LabelPurpose) and prefixes its name.
	Purpose string
	// Target names what it works on, for errors and `describe`.
	Target string
	// Pod is the pod's spec, with the container ContainerName. Run adds
	// the Secret (envFrom), the labels, restartPolicy Never and the
	// termination message path.
	Pod corev1.PodSpec
	// Secret holds the environment the container gets from a Secret
	// (credentials, the repository password): never in the pod spec.
	Secret map[string]string
	// StartTimeout bounds the wait until the container runs (scheduling,
	// claim binding and mount, image pull); Unschedulable bounds how long
	// the scheduler may call the pod unschedulable before it fails.
	StartTimeout, Unschedulable time.Duration
	// StallTimeout fails a running helper that prints no line for that long.
	StallTimeout time.Duration
	// OnLine, if set, gets each line the helper prints on stdout.
	OnLine func(line []byte)
}

// Outcome is how a helper pod ended.
type Outcome struct {
	// Pod and Node are where it ran.
	Pod, Node string
	// Message is the helper's termination message (its JSON outcome).
	Message string
	Took    time.Duration
}

// Error is a helper pod that did not finish its work, with the reason.
type Error struct {
	Target, Pod, Node, Reason string
}

func (e *Error) Error() string {
	where := "helper pod " + e.Pod
	if e.Node != "" {
		where += " on node " + e.Node
	}
	return fmt.Sprintf("%s: %s: %s", e.Target, where, e.Reason)
}

// Run starts spec's pod in the run's cluster, waits for it to end and
// returns its outcome. The pod and its Secret are deleted before Run
// returns, whatever happened (also when ctx is cancelled).
func (r *Run) Pod(ctx context.Context, spec Spec) (*Outcome, error) {
	if err := r.ensureLease(ctx, spec.Namespace); err != nil {
		return nil, err
	}
	start := time.Now()
	sec, pod := r.objects(spec)
	pods := r.client.CoreV1().Pods(spec.Namespace)
	secrets := r.client.CoreV1().Secrets(spec.Namespace)
	sec, err := secrets.Create(ctx, sec, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: creating the helper pod's Secret: %w", spec.Target, err)
	}
	defer r.remove(ctx, spec.Namespace, "secrets", sec.Name)
	pod.Spec.Containers[0].EnvFrom = append(pod.Spec.Containers[0].EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: sec.Name}}})
	pod, err = pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: creating the helper pod: %w", spec.Target, err)
	}
	defer r.remove(ctx, spec.Namespace, "pods", pod.Name)
	// The Secret goes with its pod, should this process not delete it.
	sec.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	_, _ = secrets.Update(ctx, sec, metav1.UpdateOptions{})

	w := &watcher{r: r, spec: &spec, name: pod.Name, created: time.Now()}
	final, err := w.wait(ctx)
	out := &Outcome{Pod: pod.Name, Took: time.Since(start)}
	if final != nil {
		out.Node = final.Spec.NodeName
	}
	if err != nil {
		return out, err
	}
	out.Message = terminationMessage(final)
	if final.Status.Phase != corev1.PodSucceeded {
		reason := "the helper failed"
		if out.Message != "" {
			reason += ": " + out.Message
		} else if tail := r.logTail(context.WithoutCancel(ctx), spec.Namespace, pod.Name); tail != "" {
			reason += ": " + tail
		}
		return out, &Error{Target: spec.Target, Pod: pod.Name, Node: out.Node, Reason: reason}
	}
	return out, nil
}

// objects builds the Secret and the pod of spec.
func (r *Run) objects(spec Spec) (*corev1.Secret, *corev1.Pod) {
	labels := map[string]string{LabelManagedBy: ManagedBy, LabelRun: r.ID, LabelPurpose: spec.Purpose}
	meta := metav1.ObjectMeta{GenerateName: "ferry-" + spec.Purpose + "-", Namespace: spec.Namespace, Labels: labels,
		Annotations: map[string]string{AnnotationTarget: spec.Target}}
	sec := &corev1.Secret{ObjectMeta: meta, StringData: spec.Secret, Type: corev1.SecretTypeOpaque}
	pod := &corev1.Pod{ObjectMeta: meta, Spec: *spec.Pod.DeepCopy()}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if pod.Spec.ActiveDeadlineSeconds == nil {
		// The kubelet stops it even if this process is gone.
		d := int64((spec.StartTimeout + 24*time.Hour) / time.Second)
		pod.Spec.ActiveDeadlineSeconds = &d
	}
	c := &pod.Spec.Containers[0]
	c.TerminationMessagePath = TerminationMessagePath
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
	}
	return sec, pod
}

func terminationMessage(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == ContainerName && cs.State.Terminated != nil {
			return strings.TrimSpace(cs.State.Terminated.Message)
		}
	}
	return ""
}

// logTail returns the last lines the helper printed (for a failure
// without a termination message).
func (r *Run) logTail(ctx context.Context, ns, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lines := int64(5)
	b, err := r.client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: ContainerName, TailLines: &lines}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// remove deletes one object the run created, on a context of its own so
// that a cancelled run still removes its objects.
func (r *Run) remove(ctx context.Context, ns, resource, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	var err error
	if resource == "pods" {
		err = r.client.CoreV1().Pods(ns).Delete(ctx, name, opts)
	} else {
		err = r.client.CoreV1().Secrets(ns).Delete(ctx, name, opts)
	}
	if err != nil && !apierrors.IsNotFound(err) && r.Log != nil {
		r.Log.Warn("helper object not deleted", "namespace", ns, "resource", resource, "name", name, "error", err)
	}
}

// watcher follows one helper pod until it ends.
type watcher struct {
	r       *Run
	spec    *Spec
	name    string
	created time.Time
	// lastLine is when the helper last printed a line.
	lastLine chan time.Time
}

// wait polls the pod until it has ended (returned), or fails it with the
// reason when it cannot start, stalls or ctx ends.
func (w *watcher) wait(ctx context.Context) (*corev1.Pod, error) {
	spec := w.spec
	startBy := time.Now().Add(spec.StartTimeout)
	var unschedSince time.Time
	var following bool
	last := time.Now()
	w.lastLine = make(chan time.Time, 1)
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	for {
		p, err := w.r.client.CoreV1().Pods(spec.Namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return nil, w.fail(nil, "interrupted: "+ctx.Err().Error())
			}
			return nil, w.fail(nil, "reading the pod: "+err.Error())
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			stopFollow()
			return p, nil
		}
		running := containerRunning(p)
		if running && !following {
			following = true
			last = time.Now()
			go w.follow(fctx)
		}
		select {
		case t := <-w.lastLine:
			last = t
		default:
		}
		if reason, stuck := w.stuck(ctx, p, running, startBy, &unschedSince); stuck {
			return p, w.fail(p, reason)
		}
		if running && spec.StallTimeout > 0 && time.Since(last) > spec.StallTimeout {
			return p, w.fail(p, fmt.Sprintf("stalled: no progress for %s", spec.StallTimeout))
		}
		select {
		case <-ctx.Done():
			return p, w.fail(p, "interrupted: "+ctx.Err().Error())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (w *watcher) fail(p *corev1.Pod, reason string) error {
	e := &Error{Target: w.spec.Target, Pod: w.name, Reason: reason}
	if p != nil {
		e.Node = p.Spec.NodeName
	}
	return e
}

// stuck says why a pod that has not started will not start: the
// scheduler found no node for longer than spec.Unschedulable, its image
// cannot be pulled, its container cannot be created, or the start
// deadline passed (with the last warning event, such as a failed mount).
func (w *watcher) stuck(ctx context.Context, p *corev1.Pod, running bool, startBy time.Time, unschedSince *time.Time) (string, bool) {
	if running {
		return "", false
	}
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodScheduled {
			continue
		}
		if c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			if unschedSince.IsZero() {
				*unschedSince = time.Now()
			}
			if time.Since(*unschedSince) >= w.spec.Unschedulable {
				return "cannot be scheduled: " + c.Message, true
			}
		} else {
			*unschedSince = time.Time{}
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting == nil {
			continue
		}
		switch cs.State.Waiting.Reason {
		case "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			// The kubelet retries a pull: give it the same grace.
			if time.Since(w.created) >= w.spec.Unschedulable || cs.State.Waiting.Reason == "InvalidImageName" {
				return fmt.Sprintf("container %s: %s: %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message), true
			}
		}
	}
	if time.Now().After(startBy) {
		reason := fmt.Sprintf("did not start within %s (phase %s)", w.spec.StartTimeout, p.Status.Phase)
		if ev := w.r.lastWarning(context.WithoutCancel(ctx), p); ev != "" {
			reason += ": " + ev
		}
		return reason, true
	}
	return "", false
}

func containerRunning(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == ContainerName && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// follow streams the helper's stdout, line by line, to spec.OnLine.
func (w *watcher) follow(ctx context.Context) {
	rc, err := w.r.client.CoreV1().Pods(w.spec.Namespace).GetLogs(w.name, &corev1.PodLogOptions{Container: ContainerName, Follow: true}).Stream(ctx)
	if err != nil {
		return
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		select {
		case w.lastLine <- time.Now():
		default:
			// The poll has not read the last one yet: drop and refill.
			select {
			case <-w.lastLine:
			default:
			}
			w.lastLine <- time.Now()
		}
		if w.spec.OnLine != nil {
			w.spec.OnLine(sc.Bytes())
		}
	}
}

// lastWarning returns the newest Warning event of pod p ("" if none).
func (r *Run) lastWarning(ctx context.Context, p *corev1.Pod) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	evs, err := r.client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name + ",type=Warning"})
	if err != nil || len(evs.Items) == 0 {
		return ""
	}
	sort.Slice(evs.Items, func(i, j int) bool { return eventTime(evs.Items[i]).Before(eventTime(evs.Items[j])) })
	e := evs.Items[len(evs.Items)-1]
	return e.Reason + ": " + e.Message
}

func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// DecodeMessage decodes a helper's JSON termination message into v.
func DecodeMessage(msg string, v any) error {
	if msg == "" {
		return errors.New("the helper wrote no outcome")
	}
	dec := json.NewDecoder(strings.NewReader(msg))
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("the helper's outcome is not JSON: %w", err)
	}
	return nil
}
