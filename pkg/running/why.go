package running

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubeferry/ferry/pkg/kube"
)

// imageReasons are the waiting reasons of a container whose image the
// node could not pull.
var imageReasons = map[string]bool{"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true, "ErrImageNeverPull": true}

// maxLogBytes bounds the log lines kept for a failing container.
const maxLogBytes = 2048

// explain fills in why s is not healthy, from the cluster: the first of
// its pods that is not ready and what holds it (the scheduler's reason, a
// container's waiting reason with its image or last log lines, the pod's
// warning events); else the object's own warning events.
func explain(ctx context.Context, cl *kube.Cluster, s *state) {
	if s.pods != nil && !s.pods.Empty() {
		pods, err := cl.Typed.CoreV1().Pods(s.obj.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.pods.String()})
		if err == nil {
			sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Status.Phase == corev1.PodSucceeded || (podReady(p) && s.obj.Resource != "jobs.batch") {
					continue
				}
				if reason, msg, logs := podWhy(ctx, cl, p); reason != "" {
					s.reason, s.message, s.logs = reason, "pod "+p.Name+": "+msg, logs
					return
				}
			}
			if len(pods.Items) == 0 && s.reason == "" {
				s.reason, s.message = "NoPods", "no pod matches its selector "+s.pods.String()
			}
		}
	}
	if s.reason != "" {
		return
	}
	if ev := lastWarning(ctx, cl, s.obj.Namespace, kindName(s.obj.Resource), s.obj.Name); ev != nil {
		s.reason, s.message = ev.Reason, ev.Message
		return
	}
	s.reason = "NotReady"
	if s.message == "" {
		s.message = "not healthy by the deadline, and the cluster gives no reason"
	}
}

// podWhy says what holds pod p: unschedulable, a container waiting
// (its image, or its last log lines when it crashes) or terminated with
// an error, or its latest warning event.
func podWhy(ctx context.Context, cl *kube.Cluster, p *corev1.Pod) (reason, msg, logs string) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return "FailedScheduling", c.Message, ""
		}
	}
	statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" && w.Reason != "ContainerCreating" {
			msg := fmt.Sprintf("container %s: %s", cs.Name, w.Message)
			if imageReasons[w.Reason] {
				msg = fmt.Sprintf("container %s: image %s: %s", cs.Name, cs.Image, w.Message)
			}
			if w.Reason == "CrashLoopBackOff" {
				logs = lastLogs(ctx, cl, p, cs.Name, true)
			}
			return w.Reason, msg, logs
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return t.Reason, fmt.Sprintf("container %s exited with code %d %s", cs.Name, t.ExitCode, t.Message), lastLogs(ctx, cl, p, cs.Name, false)
		}
	}
	if ev := lastWarning(ctx, cl, p.Namespace, "Pod", p.Name); ev != nil {
		return ev.Reason, ev.Message, ""
	}
	if p.Status.Phase == corev1.PodFailed {
		return "PodFailed", p.Status.Message, ""
	}
	return "", "", ""
}

// lastWarning is the latest Warning event of an object, or nil.
func lastWarning(ctx context.Context, cl *kube.Cluster, ns, kind, name string) *corev1.Event {
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "type": corev1.EventTypeWarning}.AsSelector().String()
	evs, err := cl.Typed.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(evs.Items) == 0 {
		return nil
	}
	when := func(e *corev1.Event) time.Time {
		switch {
		case !e.LastTimestamp.IsZero():
			return e.LastTimestamp.Time
		case !e.EventTime.IsZero():
			return e.EventTime.Time
		}
		return e.CreationTimestamp.Time
	}
	last := &evs.Items[0]
	for i := range evs.Items {
		if when(&evs.Items[i]).After(when(last)) {
			last = &evs.Items[i]
		}
	}
	return last
}

// lastLogs are the last lines of a container's log (of its previous run
// when it is restarting), at most maxLogBytes; "" when none can be read.
func lastLogs(ctx context.Context, cl *kube.Cluster, p *corev1.Pod, container string, previous bool) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tail, limit := int64(10), int64(maxLogBytes)
	b, err := cl.Typed.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Previous: previous, TailLines: &tail, LimitBytes: &limit}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(b), "\n")
}
