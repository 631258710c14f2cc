package migration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/running"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/transform"
)

// CutoverOptions are a cutover's own: its downtime bound and deadlines.
type CutoverOptions struct {
	// MaxDowntime, if set, runs more stages until the prediction is under
	// it, at most MaxStages (default 5) of them, then cuts over; a
	// prediction that stops shrinking ends the cutover before the quiesce.
	MaxDowntime time.Duration
	MaxStages   int
	// QuiesceTimeout bounds the wait for the source's pods to be gone
	// (default 5 minutes).
	QuiesceTimeout time.Duration
	// OnPrediction, if set, gets the prediction before the quiesce.
	OnPrediction func(Prediction)
}

// ErrNotConverging is wrapped when more stages do not bring the predicted
// downtime under CutoverOptions.MaxDowntime.
var ErrNotConverging = errors.New("the predicted downtime does not converge under the bound")

// Cutover ends staged migration o.Name: it predicts the downtime, records
// the source's workloads in the journal, quiesces them (Deployments,
// StatefulSets and ReplicaSets scaled to zero, CronJobs suspended) and
// waits until their pods are gone, then runs the migration (Run): the final
// delta of every claim, the resources with the workloads at their recorded
// counts (spec.quiescedWorkloads), and the verification, which waits until
// the target's workloads run. A cutover killed anywhere is finished by
// running it again, or undone by Rollback. The Result is the final
// migration's; the journal holds the prediction and the actual downtime.
func Cutover(ctx context.Context, o Options, co CutoverOptions) (*Result, *Journal, error) {
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	if err := CheckClusters(ctx, o.Source, o.Target); err != nil {
		return nil, nil, err
	}
	j, err := LoadJournal(ctx, o.Location, o.Name)
	if err != nil {
		return nil, nil, err
	}
	if err := j.finished(); err != nil {
		return nil, j, err
	}
	if err := sameSpecs(j, &o); err != nil {
		return nil, j, err
	}
	if err := j.sameClusters(ctx, o.Source, o.Target); err != nil {
		return nil, j, err
	}
	if j.Cutover != nil && j.Cutover.Step == CutoverRolling {
		return nil, j, fmt.Errorf("migration %s: a rollback of its cutover began and did not finish, so the source may run again: finish it with ferry migrate rollback %s before a new cutover", o.Name, o.Name)
	}
	if j.Cutover != nil && j.Cutover.Step == CutoverDone {
		return nil, j, fmt.Errorf("migration %s: its cutover finished at %s", o.Name, j.Cutover.Ready.Format(time.RFC3339))
	}
	if j.Cutover == nil {
		if err := predictCutover(ctx, &o, co, j); err != nil {
			return nil, j, err
		}
	}
	c := j.Cutover
	if c.Step == CutoverPredicted || c.Step == CutoverQuiescing {
		if err := quiesce(ctx, &o, co, j); err != nil {
			c.Error = err.Error()
			if c.Step == CutoverPredicted {
				// Nothing was recorded or scaled (a pre hook failed): no
				// cutover to undo, and stages may run again.
				j.Cutover = nil
			}
			_ = j.save(ctx, o.Location)
			return nil, j, err
		}
	}
	return finalRun(ctx, o, j)
}

// predictCutover runs stages until the prediction is under the bound (if
// any), then records the cutover with its prediction.
func predictCutover(ctx context.Context, o *Options, co CutoverOptions, j *Journal) error {
	if co.MaxStages <= 0 {
		co.MaxStages = 5
	}
	p, err := Predict(j, time.Now())
	if err != nil {
		return err
	}
	var seen []string
	// The stages it runs itself count, not those before (on a schedule,
	// or before a rollback).
	for ran := 0; co.MaxDowntime > 0 && p.Total > co.MaxDowntime; ran++ {
		seen = append(seen, round(p.Total).String())
		if ran >= co.MaxStages {
			return fmt.Errorf("migration %s: %w: the cutover ran %d more stages, the predictions were %s, the bound is %s; the cutover did not start", o.Name, ErrNotConverging, ran, strings.Join(seen, ", "), co.MaxDowntime)
		}
		if err := runStage(ctx, o, j); err != nil {
			return err
		}
		next, err := Predict(j, time.Now())
		if err != nil {
			return err
		}
		if next.Total > p.Total*95/100 && next.Total > co.MaxDowntime {
			seen = append(seen, round(next.Total).String())
			why := "the application changes its data as fast as a stage moves it"
			if next.DeltaBytes < 1<<20 {
				why = fmt.Sprintf("the final delta is %s: the prediction is the cutover's fixed cost (quiesce, helper pods, restore, start), which more stages do not lower", bytesString(next.DeltaBytes))
			}
			return fmt.Errorf("migration %s: %w: the predictions were %s (%s), the bound is %s; the cutover did not start", o.Name, ErrNotConverging, strings.Join(seen, ", "), why, co.MaxDowntime)
		}
		p = next
	}
	name := fmt.Sprintf("%s-cutover-%d", o.Name, j.Cutovers+1)
	if err := ValidateName(name); err != nil {
		return fmt.Errorf("migration %s: its cutover's backup: %w", o.Name, err)
	}
	j.Cutovers++
	j.Cutover = &CutoverRecord{Name: name, Step: CutoverPredicted, Prediction: p, Started: time.Now()}
	if co.OnPrediction != nil {
		co.OnPrediction(p)
	}
	return j.save(ctx, o.Location)
}

// quiesce records the source's workloads (before any is changed), scales
// them to zero, suspends the CronJobs, and waits until their pods are
// gone.
func quiesce(ctx context.Context, o *Options, co CutoverOptions, j *Journal) error {
	c := j.Cutover
	var froze []*corev1.Pod
	if c.Step == CutoverPredicted {
		ran, err := preHooks(ctx, o, j.Backup.IncludedNamespaces)
		c.Hooks = len(ran)
		if err != nil {
			return fmt.Errorf("migration %s: %w", o.Name, err)
		}
		froze = ran
	}
	// A quiesce that stops short thaws the pods its pre hooks froze.
	if err := stopSource(ctx, o, co, j); err != nil {
		postHooks(ctx, o, froze)
		return err
	}
	return nil
}

// stopSource records the source's workloads in the journal (at the first
// try), then scales them to zero and waits until their pods are gone.
func stopSource(ctx context.Context, o *Options, co CutoverOptions, j *Journal) error {
	c := j.Cutover
	src := o.Source.Typed
	if c.Step == CutoverPredicted {
		ws, err := workloads(ctx, src, j.Backup.IncludedNamespaces)
		if err != nil {
			return fmt.Errorf("migration %s: reading the source's workloads: %w", o.Name, err)
		}
		c.Workloads, c.Step, c.QuiesceStarted = ws, CutoverQuiescing, time.Now()
		if err := j.save(ctx, o.Location); err != nil {
			return err // nothing was scaled
		}
	}
	o.Log.Info("quiescing the source", "migration", o.Name, "workloads", len(c.Workloads))
	for _, w := range c.Workloads {
		if err := scale(ctx, src, w, 0, true); err != nil {
			return fmt.Errorf("migration %s: quiescing %s %s/%s: %w (ferry migrate rollback %s restores the recorded counts)", o.Name, w.Kind, w.Namespace, w.Name, err, o.Name)
		}
	}
	timeout := co.QuiesceTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	if err := podsGone(ctx, src, j.Backup.IncludedNamespaces, timeout); err != nil {
		return fmt.Errorf("migration %s: %w", o.Name, err)
	}
	c.PodsGone, c.Step = time.Now(), CutoverQuiesced
	return j.save(ctx, o.Location)
}

// finalRun runs the migration of the quiesced source and records its
// timings and outcome.
func finalRun(ctx context.Context, o Options, j *Journal) (*Result, *Journal, error) {
	c := j.Cutover
	o.Backup.Spec = j.Backup
	if o.Backup.PodVolumes != nil {
		pv := *o.Backup.PodVolumes
		pv.UnmountedClaims = true
		o.Backup.PodVolumes = &pv
	}
	o.Restore.Spec = j.Restore
	o.Restore.Spec.QuiescedWorkloads = c.Workloads
	// The stages' claims hold the data: the final delta is written into
	// them whatever the first stage's policy said.
	o.Restore.Spec.ExistingVolumeDataPolicy = v1alpha1.VolumeDataWrite
	o.Resume, o.Verify = true, true
	o.Name = c.Name
	o.complete()
	next := o.OnStep
	var ready <-chan time.Time
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	o.OnStep = func(s Step) {
		switch s {
		case StepRestore:
			c.DeltaDone = time.Now()
		case StepVerify:
			c.Restored = time.Now()
			ready = watchReady(watchCtx, &o, j)
		}
		if next != nil {
			next(s)
		}
	}
	if res, done, err := rerun(ctx, &o); done || err != nil {
		return finish(ctx, o, j, res, err)
	}
	if err := removeTargetCopies(ctx, &o, j); err != nil {
		return finish(ctx, o, j, nil, err)
	}
	res, err := Run(ctx, o)
	if ready != nil {
		select {
		case c.targetReady = <-ready:
		default: // the verification saw them Ready first
		}
	}
	return finish(ctx, o, j, res, err)
}

// watchReady watches, from the end of the cutover's restore, the
// target's copies of the quiesced workloads (running.Check, every 250ms)
// and sends when they were all healthy, or the zero time. The downtime
// ends then: the verification compares every object before its own
// runtime check, and would see them Ready seconds after they served.
func watchReady(ctx context.Context, o *Options, j *Journal) <-chan time.Time {
	kinds := map[string]string{"Deployment": "deployments.apps", "StatefulSet": "statefulsets.apps", "CronJob": "cronjobs.batch"}
	var objs []running.Object
	for _, w := range j.Cutover.Workloads {
		if r := kinds[w.Kind]; r != "" {
			objs = append(objs, running.Object{Resource: r, Namespace: mapNamespace(j.Restore, w.Namespace), Name: w.Name})
		}
	}
	ro := running.Options{Poll: 250 * time.Millisecond, Log: o.Log}
	if rt := j.Restore.VerifyRuntime; rt != nil && rt.Timeout != nil {
		ro.Timeout = rt.Timeout.Duration
	}
	ch := make(chan time.Time, 1)
	go func() {
		var at time.Time
		if len(objs) > 0 {
			at = running.Check(ctx, o.Target, objs, ro).Ready
		}
		ch <- at
	}()
	return ch
}

// finish records the outcome of the cutover's migration.
func finish(ctx context.Context, o Options, j *Journal, res *Result, err error) (*Result, *Journal, error) {
	c := j.Cutover
	if err != nil {
		c.Error = err.Error()
		_ = j.save(ctx, o.Location)
		return res, j, err
	}
	phase, _, msg := res.Outcome()
	if phase == v1alpha1.PhaseCompleted {
		// A claim the restore left alone (a pod mounted it) did not get
		// the final delta: the cutover is not done.
		for _, cl := range claimStages(ctx, o.Location, o.Name) {
			if cl.Error != "" {
				phase, msg = v1alpha1.PhasePartiallyFailed, fmt.Sprintf("claim %s did not get the final delta: %s", cl.Claim, cl.Error)
				break
			}
		}
	}
	c.Phase = phase
	if phase != v1alpha1.PhaseCompleted {
		// Not done: the step stays Quiesced, and running the cutover again
		// resumes the restore (or the user rolls back).
		c.Error = msg
		_ = j.save(ctx, o.Location)
		return res, j, nil
	}
	c.Ready, c.Step = time.Now(), CutoverDone
	if v := res.Verification; v != nil && v.Running != nil && !v.Running.Ready.IsZero() {
		// The workloads serve from there: the data check after it is the
		// verification's, not downtime.
		c.Ready = v.Running.Ready
	}
	if t := c.targetReady; !t.IsZero() && t.Before(c.Ready) {
		// Seen by the watch of the quiesced workloads' copies, which
		// does not wait for the objects' comparison.
		c.Ready = t
	}
	c.Downtime = c.Ready.Sub(c.QuiesceStarted)
	c.Error = ""
	if err := j.save(ctx, o.Location); err != nil {
		return res, j, err
	}
	return res, j, keepCutoverReport(ctx, &o, j, res.Verification)
}

// rerun prepares the cutover's migration when a killed run of it left
// something. A backup without a restore (the run was killed during or
// right after its backup) is removed: the source is quiesced, so a new
// backup holds the same data, and only this cutover writes under its
// name. A restore that Completed (the run was killed before the journal
// said so) is not run again: only its verification runs (done true).
func rerun(ctx context.Context, o *Options) (*Result, bool, error) {
	rs, err := o.Location.GetRestore(ctx, o.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if err := o.Location.DeleteBackup(ctx, o.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, false, fmt.Errorf("cutover %s: removing the backup a killed run of it left: %w", o.Name, err)
		}
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case rs.Status.Phase != v1alpha1.PhaseCompleted:
		return nil, false, nil // Run resumes it
	}
	b, err := o.Location.GetBackup(ctx, o.Name)
	if err != nil {
		return nil, false, err
	}
	o.step(StepVerify)
	res := &Result{Backup: b, Restore: rs, Resumed: true}
	if res.Verification, err = verify(ctx, o, res); err != nil {
		return res, true, fmt.Errorf("%w of migration %s: %w", ErrVerification, o.Name, err)
	}
	return res, true, nil
}

// removeTargetCopies deletes the target's copies of the quiesced
// workloads that an earlier cutover created and its rollback scaled to
// zero, and waits until they are gone: the restore creates them again at
// their recorded counts (it does not update what exists).
func removeTargetCopies(ctx context.Context, o *Options, j *Journal) error {
	if j.Cutovers < 2 {
		return nil // no earlier cutover created any
	}
	for _, w := range j.Cutover.Workloads {
		t := w
		t.Namespace = mapNamespace(j.Restore, w.Namespace)
		// Only a copy an earlier cutover of this migration restored: what
		// the user put in the target is not ferry's to delete.
		ours, _, err := j.cutoverCopy(ctx, o.Target.Typed, t)
		if err != nil {
			return fmt.Errorf("cutover %s: %w", o.Name, err)
		}
		if !ours {
			continue
		}
		if err := deleteWorkload(ctx, *o, t); err != nil {
			return fmt.Errorf("cutover %s: removing the target's %s %s/%s that an earlier cutover left: %w", o.Name, t.Kind, t.Namespace, t.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, _, err := targetWorkload(ctx, o.Target.Typed, t)
			return isNotFound(err), nil
		})
		if err != nil {
			return fmt.Errorf("cutover %s: the target's %s %s/%s that an earlier cutover left is not gone: %w", o.Name, t.Kind, t.Namespace, t.Name, err)
		}
	}
	return nil
}

// cutoverCopy says whether the target's workload w is a copy that a
// cutover of j restored: its ferry.dev/restore label is one of the
// cutovers' restore names (as a label value, which a long name is cut to).
// A workload the target had of its own, or none, is not. pods selects its
// pods (nil for a CronJob). A workload that cannot be read is an error:
// whether it runs is not known.
func (j *Journal) cutoverCopy(ctx context.Context, c kubernetes.Interface, w v1alpha1.QuiescedWorkload) (ok bool, pods labels.Selector, err error) {
	m, sel, err := targetWorkload(ctx, c, w)
	switch {
	case isNotFound(err):
		return false, nil, nil
	case err != nil:
		return false, nil, fmt.Errorf("reading the target's %s %s/%s: %w", w.Kind, w.Namespace, w.Name, err)
	}
	for i := 1; i <= j.Cutovers; i++ {
		if m.GetLabels()[v1alpha1.LabelRestore] == transform.LabelValue(fmt.Sprintf("%s-cutover-%d", j.Name, i)) {
			return true, sel, nil
		}
	}
	return false, nil, nil
}

// targetWorkload reads workload w in the cluster of c, with the selector
// of its pods (nil for a CronJob).
func targetWorkload(ctx context.Context, c kubernetes.Interface, w v1alpha1.QuiescedWorkload) (m metav1.Object, pods labels.Selector, err error) {
	var ls *metav1.LabelSelector
	switch w.Kind {
	case "Deployment":
		var d *appsv1.Deployment
		if d, err = c.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			m, ls = d, d.Spec.Selector
		}
	case "StatefulSet":
		var st *appsv1.StatefulSet
		if st, err = c.AppsV1().StatefulSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			m, ls = st, st.Spec.Selector
		}
	case "ReplicaSet":
		var r *appsv1.ReplicaSet
		if r, err = c.AppsV1().ReplicaSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			m, ls = r, r.Spec.Selector
		}
	case "CronJob":
		m, err = c.BatchV1().CronJobs(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	default:
		return nil, nil, fmt.Errorf("kind %s is not quiesced", w.Kind)
	}
	if err != nil {
		return nil, nil, err
	}
	if ls != nil {
		if sel, err := metav1.LabelSelectorAsSelector(ls); err == nil && !sel.Empty() {
			pods = sel
		}
	}
	return m, pods, nil
}

// workloads lists the source's Deployments, StatefulSets, ReplicaSets
// (not a Deployment's) and CronJobs in namespaces, with their counts.
func workloads(ctx context.Context, c kubernetes.Interface, namespaces []string) ([]v1alpha1.QuiescedWorkload, error) {
	var out []v1alpha1.QuiescedWorkload
	add := func(kind string, m metav1.ObjectMeta, replicas *int32) {
		n := int32(1)
		if replicas != nil {
			n = *replicas
		}
		out = append(out, v1alpha1.QuiescedWorkload{Kind: kind, Namespace: m.Namespace, Name: m.Name, Replicas: &n})
	}
	for _, ns := range namespaces {
		ds, err := c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, d := range ds.Items {
			add("Deployment", d.ObjectMeta, d.Spec.Replicas)
		}
		ss, err := c.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, s := range ss.Items {
			add("StatefulSet", s.ObjectMeta, s.Spec.Replicas)
		}
		rs, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, r := range rs.Items {
			if metav1.GetControllerOf(&r) == nil {
				add("ReplicaSet", r.ObjectMeta, r.Spec.Replicas)
			}
		}
		cjs, err := c.BatchV1().CronJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, cj := range cjs.Items {
			s := cj.Spec.Suspend != nil && *cj.Spec.Suspend
			out = append(out, v1alpha1.QuiescedWorkload{Kind: "CronJob", Namespace: ns, Name: cj.Name, Suspended: &s})
		}
	}
	sort.Slice(out, func(a, b int) bool {
		return out[a].Namespace+"/"+out[a].Kind+"/"+out[a].Name < out[b].Namespace+"/"+out[b].Kind+"/"+out[b].Name
	})
	return out, nil
}

// scale sets workload w's replicas to n (quiesce: suspends a CronJob), or
// back to its recorded count and suspension (quiesce false). A workload
// that is gone is left so.
func scale(ctx context.Context, c kubernetes.Interface, w v1alpha1.QuiescedWorkload, n int32, quiesce bool) error {
	var patch string
	switch {
	case w.Kind == "CronJob" && quiesce:
		patch = `{"spec":{"suspend":true}}`
	case w.Kind == "CronJob":
		patch = fmt.Sprintf(`{"spec":{"suspend":%t}}`, w.Suspended != nil && *w.Suspended)
	case quiesce:
		patch = fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	default:
		patch = fmt.Sprintf(`{"spec":{"replicas":%d}}`, *w.Replicas)
	}
	var err error
	p, opts := []byte(patch), metav1.PatchOptions{}
	switch w.Kind {
	case "Deployment":
		_, err = c.AppsV1().Deployments(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, p, opts)
	case "StatefulSet":
		_, err = c.AppsV1().StatefulSets(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, p, opts)
	case "ReplicaSet":
		_, err = c.AppsV1().ReplicaSets(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, p, opts)
	case "CronJob":
		_, err = c.BatchV1().CronJobs(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, p, opts)
	default:
		return fmt.Errorf("kind %s is not quiesced", w.Kind)
	}
	if err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// podsGone waits until no pod of a StatefulSet or a ReplicaSet is left in
// namespaces, up to timeout; then it names those that are.
func podsGone(ctx context.Context, c kubernetes.Interface, namespaces []string, timeout time.Duration) error {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for _, ns := range namespaces {
			pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil // retried until the deadline
			}
			for _, p := range pods.Items {
				if quiescedPod(&p) {
					left = append(left, ns+"/"+p.Name)
				}
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the source's pods were not gone within %s after the quiesce: %s (still there: %s)", timeout, err, strings.Join(left, ", "))
	}
	return nil
}

// cutoverReport is j's cutover for the report: its stages, and each
// step's predicted time against the actual one.
func cutoverReport(j *Journal) *report.Cutover {
	c := j.Cutover
	out := &report.Cutover{Basis: c.Prediction.Basis}
	for _, s := range j.Stages {
		if s.Ended.IsZero() || s.Error != "" {
			continue
		}
		st := report.CutoverStage{Number: s.Number, Started: s.Started, Seconds: s.Duration().Seconds(), Claims: len(s.Claims)}
		for _, cl := range s.Claims {
			st.ScannedBytes += cl.ScannedBytes
			st.ChangedBytes += cl.ChangedBytes
			st.UploadedBytes += cl.UploadedBytes
			st.Vanished += cl.Vanished
		}
		out.Stages = append(out.Stages, st)
	}
	p := c.Prediction
	step := func(name string, pred time.Duration, start, end time.Time) report.CutoverStep {
		s := report.CutoverStep{Step: name, Predicted: pred.Seconds(), Start: start, End: end}
		if !start.IsZero() && !end.IsZero() {
			s.Actual = end.Sub(start).Seconds()
		}
		return s
	}
	out.Steps = []report.CutoverStep{
		step("quiesce (source pods gone)", p.Quiesce, c.QuiesceStarted, c.PodsGone),
		step("final delta (snapshots)", p.Delta, c.PodsGone, c.DeltaDone),
		step("restore (delta written, objects created)", p.Restore, c.DeltaDone, c.Restored),
		step("objects compared, start until Ready", p.Start, c.Restored, c.Ready),
	}
	out.Total = step("downtime", p.Total, c.QuiesceStarted, c.Ready)
	return out
}

// keepCutoverReport adds the cutover to the final migration's report and
// keeps it in the location again (VerifyRestore kept it without).
func keepCutoverReport(ctx context.Context, o *Options, j *Journal, v *report.Verification) error {
	if v == nil {
		return nil
	}
	v.Cutover = cutoverReport(j)
	jsonKey, htmlKey := ReportKeys(o.Name)
	err := put(ctx, o.Location, jsonKey, v.WriteJSON)
	if err == nil {
		err = put(ctx, o.Location, htmlKey, v.WriteHTML)
	}
	if err != nil {
		return fmt.Errorf("%w of migration %s: keeping the report with its cutover in the location: %w", ErrVerification, o.Name, err)
	}
	return nil
}
