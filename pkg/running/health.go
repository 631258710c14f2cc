package running

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/robfig/cron/v3"

	"github.com/kubeferry/ferry/pkg/kube"
)

// health looks once at o in the target.
func health(ctx context.Context, cl *kube.Cluster, o Object) state {
	s := state{obj: o}
	var err error
	switch o.Resource {
	case "deployments.apps":
		err = deployment(ctx, cl, &s)
	case "statefulsets.apps":
		err = statefulSet(ctx, cl, &s)
	case "daemonsets.apps":
		err = daemonSet(ctx, cl, &s)
	case "jobs.batch":
		err = job(ctx, cl, &s)
	case "cronjobs.batch":
		err = cronJob(ctx, cl, &s)
	case "pods":
		err = pod(ctx, cl, &s)
	case "services":
		err = service(ctx, cl, &s)
	case "persistentvolumeclaims":
		err = claim(ctx, cl, &s)
	}
	switch {
	case apierrors.IsNotFound(err):
		s.ok, s.outcome, s.reason, s.message = false, "missing", "NotFound", "not in the target"
	case err != nil:
		s.ok, s.outcome, s.reason, s.message = false, "not checked", string(apierrors.ReasonForError(err)), "reading it from the target: "+err.Error()
	}
	return s
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func deployment(ctx context.Context, cl *kube.Cluster, s *state) error {
	d, err := cl.Typed.AppsV1().Deployments(s.obj.Namespace).Get(ctx, s.obj.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.spec, s.pods = &d.Spec.Template.Spec, selector(d.Spec.Selector)
	want := replicas(d.Spec.Replicas)
	s.detail = fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, want)
	s.ok = d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= want && d.Status.UpdatedReplicas >= want
	for _, c := range d.Status.Conditions {
		if (c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue) || (c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse) {
			s.reason, s.message = c.Reason, c.Message
		}
	}
	s.outcome = outcome(s.ok, want)
	return nil
}

func statefulSet(ctx context.Context, cl *kube.Cluster, s *state) error {
	st, err := cl.Typed.AppsV1().StatefulSets(s.obj.Namespace).Get(ctx, s.obj.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.spec, s.pods = &st.Spec.Template.Spec, selector(st.Spec.Selector)
	want := replicas(st.Spec.Replicas)
	s.detail = fmt.Sprintf("%d of %d replicas ready", st.Status.ReadyReplicas, want)
	s.ok = st.Status.ObservedGeneration >= st.Generation && st.Status.ReadyReplicas >= want
	s.outcome = outcome(s.ok, want)
	return nil
}

func daemonSet(ctx context.Context, cl *kube.Cluster, s *state) error {
	ds, err := cl.Typed.AppsV1().DaemonSets(s.obj.Namespace).Get(ctx, s.obj.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.spec, s.pods = &ds.Spec.Template.Spec, selector(ds.Spec.Selector)
	st := ds.Status
	s.detail = fmt.Sprintf("%d of %d scheduled pods ready", st.NumberReady, st.DesiredNumberScheduled)
	if st.DesiredNumberScheduled == 0 {
		s.detail = "no node matches its node selector and tolerations"
	}
	s.ok = st.ObservedGeneration >= ds.Generation && st.NumberReady >= st.DesiredNumberScheduled && st.NumberUnavailable == 0
	s.outcome = outcome(s.ok, st.DesiredNumberScheduled)
	return nil
}

func outcome(ok bool, want int32) string {
	switch {
	case ok && want == 0:
		return "scaled to zero"
	case ok:
		return "running"
	}
	return "not running"
}

func job(ctx context.Context, cl *kube.Cluster, s *state) error {
	j, err := cl.Typed.BatchV1().Jobs(s.obj.Namespace).Get(ctx, s.obj.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.spec, s.pods = &j.Spec.Template.Spec, selector(j.Spec.Selector)
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			s.ok, s.outcome, s.detail = true, "complete", fmt.Sprintf("%d succeeded", j.Status.Succeeded)
			return nil
		case batchv1.JobFailed:
			s.outcome, s.reason, s.message = "failed", c.Reason, c.Message
			return nil
		}
	}
	// Its pods succeeded, and the controller has not written its
	// condition yet; a pod it has seen finish and not yet counted (its
	// finalizer still on) counts.
	succeeded := j.Status.Succeeded
	if u := j.Status.UncountedTerminatedPods; u != nil {
		succeeded += int32(len(u.Succeeded))
	}
	if want := replicas(j.Spec.Completions); j.Status.Failed == 0 && j.Status.Active == 0 && succeeded >= want {
		s.ok, s.outcome, s.detail = true, "complete", fmt.Sprintf("%d succeeded", succeeded)
		return nil
	}
	if j.Spec.Suspend != nil && *j.Spec.Suspend {
		s.ok, s.outcome = true, "suspended"
		return nil
	}
	// Still running within its deadline: healthy once a pod of it runs.
	s.outcome, s.detail = "not running", fmt.Sprintf("%d active, %d succeeded, %d failed", j.Status.Active, j.Status.Succeeded, j.Status.Failed)
	if ready := j.Status.Ready; j.Status.Active > 0 && (ready == nil || *ready > 0) { // no ready count: a cluster before it
		s.ok, s.outcome = true, "running"
		return nil
	}
	// A pod of it finished and the controller has not counted it yet
	// (still active and no longer ready, or neither active nor counted):
	// it ran.
	if finishedPods(ctx, cl, j.Namespace, s.pods) > j.Status.Succeeded {
		s.ok, s.outcome = true, "running"
		s.detail += "; a pod succeeded, not counted by the Job controller yet"
	}
	return nil
}

// finishedPods counts the pods sel selects in ns that have succeeded.
func finishedPods(ctx context.Context, cl *kube.Cluster, ns string, sel labels.Selector) int32 {
	if sel == nil || sel.Empty() {
		return 0
	}
	pods, err := cl.Typed.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return 0
	}
	var n int32
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodSucceeded {
			n++
		}
	}
	return n
}

func cronJob(ctx context.Context, cl *kube.Cluster, s *state) error {
	cj, err := cl.Typed.BatchV1().CronJobs(s.obj.Namespace).Get(ctx, s.obj.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.spec = &cj.Spec.JobTemplate.Spec.Template.Spec
	if _, err := cron.ParseStandard(cj.Spec.Schedule); err != nil {
		s.outcome, s.reason, s.message = "invalid", "InvalidSchedule", fmt.Sprintf("schedule %q: %v", cj.Spec.Schedule, err)
		return nil
	}
	s.ok, s.outcome, s.detail = true, "scheduled", "schedule "+cj.Spec.Schedule
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		s.outcome = "suspended"
	}
	return nil
}

func pod(ctx context.Context, cl *kube.Cluster, s *state) error {
	p, err := cl.Typed.CoreV1().Pods(s.obj.Namespace).Get(ctx, s.obj.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if metav1.GetControllerOf(p) != nil {
		s.skip = true // its controller's row says how it runs
		return nil
	}
	s.spec, s.pods = &p.Spec, labels.SelectorFromSet(labels.Set{corev1.LabelMetadataName: p.Name})
	switch {
	case p.Status.Phase == corev1.PodSucceeded:
		s.ok, s.outcome = true, "completed"
	case podReady(p):
		s.ok, s.outcome = true, "running"
	default:
		s.outcome, s.detail = "not running", string(p.Status.Phase)
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func service(ctx context.Context, cl *kube.Cluster, s *state) error {
	svc, err := cl.Typed.CoreV1().Services(s.obj.Namespace).Get(ctx, s.obj.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(svc.Spec.Selector) == 0 || svc.Spec.Type == corev1.ServiceTypeExternalName {
		s.skip = true // its endpoints are someone else's
		return nil
	}
	s.pods = labels.SelectorFromSet(svc.Spec.Selector)
	slices, err := cl.Typed.DiscoveryV1().EndpointSlices(s.obj.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
	if err != nil {
		return err
	}
	ready := 0
	for _, sl := range slices.Items {
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready++
			}
		}
	}
	s.ok, s.detail = ready > 0, fmt.Sprintf("%d ready endpoint(s)", ready)
	s.outcome = "serving"
	if !s.ok {
		s.outcome = "no ready endpoint"
		// No pod to serve (its workload scaled to zero): nothing is wrong
		// with the Service; a workload that cannot start has its own row.
		pods, err := cl.Typed.CoreV1().Pods(s.obj.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.pods.String(), Limit: 1})
		if err == nil && len(pods.Items) == 0 {
			s.ok, s.outcome = true, "no pods selected"
		}
	}
	return nil
}

func claim(ctx context.Context, cl *kube.Cluster, s *state) error {
	c, err := cl.Typed.CoreV1().PersistentVolumeClaims(s.obj.Namespace).Get(ctx, s.obj.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.outcome = string(c.Status.Phase)
	if c.Status.Phase == corev1.ClaimBound {
		q := c.Status.Capacity[corev1.ResourceStorage]
		s.ok, s.outcome, s.detail = true, "bound", fmt.Sprintf("volume %s, %s", c.Spec.VolumeName, q.String())
		return nil
	}
	// A claim of a class that binds at its first consumer stays Pending
	// until a pod uses it: healthy while nothing does (a workload scaled
	// to zero); a pod that uses it and cannot start shows in its own row.
	if cls := c.Spec.StorageClassName; c.Status.Phase == corev1.ClaimPending && cls != nil && *cls != "" {
		sc, err := cl.Typed.StorageV1().StorageClasses().Get(ctx, *cls, metav1.GetOptions{})
		if err == nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
			s.ok, s.outcome, s.detail = true, "waiting for its first consumer", "storage class "+sc.Name+" binds a claim when a pod uses it"
		}
	}
	return nil
}

func selector(ls *metav1.LabelSelector) labels.Selector {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}
