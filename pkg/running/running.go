// Package running owns the runtime check of a restore: whether the
// applications it wrote into the target run there. Every restored
// workload is waited for, up to a deadline, until it is healthy
// (Deployments, StatefulSets and DaemonSets available at their replica
// counts, Jobs complete or running, CronJobs with a valid schedule,
// standalone Pods ready), every Service that selects pods has a ready
// endpoint, every claim is bound, and every image the workloads name is
// resolved at its registry. What does not get there is reported with the
// cluster's own reason (docs/design.md#runtime-checks).
package running

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
)

// DefaultTimeout is how long Check waits for the restored workloads to
// become healthy when Options.Timeout is not set: long enough for images
// to be pulled and databases to start, short enough to report a workload
// that never will be.
const DefaultTimeout = 5 * time.Minute

// NoNodes is why Check skips a target without nodes: nothing can run
// there yet, as in a move of resources ahead of the target's node pools.
const NoNodes = "the target has no nodes, so nothing can run there yet: the objects were compared, and whether the workloads run was not checked"

// Object is one restored object in the target: its group-resource
// ("deployments.apps") and its target namespace and name.
type Object struct {
	Resource, Namespace, Name string
}

// checkedResources are the group-resources Check looks at.
var checkedResources = map[string]bool{
	"deployments.apps": true, "statefulsets.apps": true, "daemonsets.apps": true,
	"jobs.batch": true, "cronjobs.batch": true, "pods": true,
	"services": true, "persistentvolumeclaims": true,
}

// Objects are the objects of a verification's items that Check looks at:
// those of the checked kinds that are in the target (matched, or
// differing from the backup).
func Objects(items []report.Result) []Object {
	var out []Object
	for _, it := range items {
		if !checkedResources[it.Resource] || (it.Outcome != report.Match && it.Outcome != report.Differs) {
			continue
		}
		o := Object{Resource: it.Resource, Namespace: it.Namespace, Name: it.Name}
		if it.TargetNamespace != "" {
			o.Namespace = it.TargetNamespace
		}
		if it.TargetName != "" {
			o.Name = it.TargetName
		}
		out = append(out, o)
	}
	return out
}

// Options tune Check.
type Options struct {
	// Timeout bounds the wait for the workloads (default DefaultTimeout).
	Timeout time.Duration
	// Poll is the time between two looks at the workloads (default 500ms
	// while at most 50 are not healthy yet, so that a cutover's downtime
	// ends when its workloads are Ready, not up to a poll later; 2s
	// while more are).
	Poll time.Duration
	// Images, if set, resolves each image reference the workloads name
	// at its registry (from where ferry runs); nil leaves images out.
	Images ImageResolver
	// Digests are the digests the backup recorded for its images: an
	// image whose registry names another digest is reported.
	Digests map[string]bool
	// Referrers are the referrers that travelled with each image, by the
	// image's digest: each must be listed at the image's registry.
	Referrers map[string][]images.Referrer
	Log       *slog.Logger
}

// state is what one look found about one object.
type state struct {
	obj             Object
	skip            bool // not checked (a Service without selector, a Pod a controller owns)
	ok              bool
	outcome, detail string
	reason, message string
	logs            string
	// pods selects the object's pods, to say why it is not healthy.
	pods labels.Selector
	// spec is the pod spec the object runs (its images).
	spec *corev1.PodSpec
}

// Check waits up to o.Timeout for the objects to be healthy, then returns
// the running section: one row per object (and per image), with the
// reason of those that are not.
func Check(ctx context.Context, cl *kube.Cluster, objs []Object, o Options) *report.Running {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	nodes, err := cl.Typed.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case err != nil:
		return &report.Running{Skipped: "the target's nodes could not be listed: " + err.Error()}
	case len(nodes.Items) == 0:
		return &report.Running{Skipped: NoNodes}
	}
	states := make([]state, len(objs))
	for i := range objs {
		states[i] = state{obj: objs[i], outcome: "not checked yet"}
	}
	look := func(all bool) int {
		pending := 0
		for i := range states {
			if all || !states[i].ok {
				states[i] = health(ctx, cl, objs[i])
			}
			if !states[i].ok && !states[i].skip {
				pending++
			}
		}
		return pending
	}
	deadline := start.Add(o.Timeout)
	for pending := look(false); pending > 0 && time.Now().Before(deadline) && ctx.Err() == nil; pending = look(false) {
		o.Log.Debug("waiting for the restored workloads", "deadline", deadline, "pending", pending)
		select {
		case <-ctx.Done():
		case <-time.After(o.poll(pending)):
		}
	}
	// A workload that was healthy at its first look may have failed since
	// (a container that crashes after it started): one last look at all.
	var ready time.Time
	if look(true) == 0 {
		ready = time.Now()
	}
	var checks []report.Check
	for i := range states {
		s := &states[i]
		if s.skip {
			continue
		}
		if !s.ok {
			explain(ctx, cl, s)
		}
		checks = append(checks, s.row())
	}
	waited := time.Since(start).Seconds()
	if o.Images != nil {
		checks = append(checks, checkImages(ctx, o.Images, o.Digests, o.Referrers, states)...)
	}
	r := report.NewRunning(checks)
	r.Waited, r.Ready = waited, ready
	if o.Images != nil {
		r.ImagesCheckedFrom = "from where ferry runs, not from the target's nodes (a node that cannot pull shows in its workload's row)"
	}
	return r
}

// poll is the wait before the next look, with pending objects not
// healthy yet.
func (o Options) poll(pending int) time.Duration {
	switch {
	case o.Poll > 0:
		return o.Poll
	case pending <= 50:
		return 500 * time.Millisecond
	}
	return 2 * time.Second
}

func (s *state) row() report.Check {
	kind := report.KindWorkload
	switch s.obj.Resource {
	case "services":
		kind = report.KindService
	case "persistentvolumeclaims":
		kind = report.KindClaim
	}
	return report.Check{Kind: kind, Resource: kindName(s.obj.Resource), Namespace: s.obj.Namespace, Name: s.obj.Name,
		OK: s.ok, Outcome: s.outcome, Detail: s.detail, Reason: s.reason, Message: s.message, Logs: s.logs, Bound: kind == report.KindClaim && s.ok}
}

// kindName is the Kind of a checked group-resource.
func kindName(resource string) string {
	return map[string]string{
		"deployments.apps": "Deployment", "statefulsets.apps": "StatefulSet", "daemonsets.apps": "DaemonSet",
		"jobs.batch": "Job", "cronjobs.batch": "CronJob", "pods": "Pod",
		"services": "Service", "persistentvolumeclaims": "PersistentVolumeClaim",
	}[resource]
}
