package migration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/transform"
)

// TestQuiesceRecordsBeforeScaling: the cutover's quiesce records every
// workload's count in the journal before it scales any (a process killed
// after a scale still finds the count), scales them to zero and suspends
// the CronJobs; a rollback puts each back as recorded, and scales the
// target's copies to zero.
func TestQuiesceRecordsBeforeScaling(t *testing.T) {
	ctx := context.Background()
	three, two, no := int32(3), int32(2), false
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "shop", Name: name} }
	objs := func() []any {
		return []any{
			&appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Replicas: &two}},
			&appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{Replicas: &three}},
			&batchv1.CronJob{ObjectMeta: meta("nightly"), Spec: batchv1.CronJobSpec{Suspend: &no}},
		}
	}
	// In the target, db and nightly are the cutover's copies; web is the
	// target's own (no restore label of this migration).
	dst := objs()
	for _, d := range dst[1:] {
		d.(metav1.Object).SetLabels(map[string]string{v1alpha1.LabelRestore: "m-cutover-1"})
	}
	srcClient, dstClient := fakeClient(objs()), fakeClient(dst)
	loc, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	o := &Options{Name: "m", Source: &kube.Cluster{Typed: srcClient}, Target: &kube.Cluster{Typed: dstClient}, Location: loc}
	o.complete()
	j := &Journal{Name: "m", Cutovers: 1, Cutover: &CutoverRecord{Name: "m-cutover-1", Step: CutoverPredicted}}
	j.Backup.IncludedNamespaces = []string{"shop"}
	// The journal is read back at each patch of the quiesce: the counts
	// are in it.
	quiescing := true
	srcClient.PrependReactor("patch", "*", func(_ ktesting.Action) (bool, runtime.Object, error) {
		if !quiescing {
			return false, nil, nil
		}
		got, err := LoadJournal(ctx, loc, "m")
		if err != nil || got.Cutover == nil || len(got.Cutover.Workloads) != 3 || got.Cutover.Step != CutoverQuiescing {
			t.Errorf("a workload was scaled before the journal recorded the counts: %+v %v", got, err)
		}
		return false, nil, nil
	})
	if err := quiesce(ctx, o, CutoverOptions{QuiesceTimeout: 5 * time.Second}, j); err != nil {
		t.Fatal(err)
	}
	if d, _ := srcClient.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{}); *d.Spec.Replicas != 0 {
		t.Errorf("web at %d after the quiesce", *d.Spec.Replicas)
	}
	if c, _ := srcClient.BatchV1().CronJobs("shop").Get(ctx, "nightly", metav1.GetOptions{}); !*c.Spec.Suspend {
		t.Error("the CronJob was not suspended")
	}
	if j.Cutover.Step != CutoverQuiesced {
		t.Errorf("step %s", j.Cutover.Step)
	}
	quiescing = false
	if _, err := Rollback(ctx, *o, RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	if d, _ := srcClient.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{}); *d.Spec.Replicas != 2 {
		t.Errorf("web at %d after the rollback, want 2", *d.Spec.Replicas)
	}
	if s, _ := srcClient.AppsV1().StatefulSets("shop").Get(ctx, "db", metav1.GetOptions{}); *s.Spec.Replicas != 3 {
		t.Errorf("db at %d after the rollback, want 3", *s.Spec.Replicas)
	}
	if c, _ := srcClient.BatchV1().CronJobs("shop").Get(ctx, "nightly", metav1.GetOptions{}); *c.Spec.Suspend {
		t.Error("the CronJob is still suspended after the rollback")
	}
	if s, _ := dstClient.AppsV1().StatefulSets("shop").Get(ctx, "db", metav1.GetOptions{}); *s.Spec.Replicas != 0 {
		t.Errorf("target's db at %d after the rollback, want 0", *s.Spec.Replicas)
	}
	if d, _ := dstClient.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{}); *d.Spec.Replicas != 2 {
		t.Errorf("the target's own web (not a cutover's copy) at %d after the rollback, want 2", *d.Spec.Replicas)
	}
	if got, _ := LoadJournal(ctx, loc, "m"); got.Cutover != nil || got.RolledBack == nil {
		t.Errorf("journal after the rollback: %+v", got)
	}
	if _, err := Rollback(ctx, *o, RollbackOptions{}); err == nil {
		t.Error("a second rollback without a cutover succeeded")
	}
}

func fakeClient(objs []any) *fake.Clientset {
	var ros []runtime.Object
	for _, o := range objs {
		ros = append(ros, o.(runtime.Object))
	}
	return fake.NewClientset(ros...)
}

// TestFinish: only a finished cutover can be declared done, and after it
// no rollback, stage or cutover runs.
func TestFinish(t *testing.T) {
	ctx := context.Background()
	loc, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	if _, err := Finish(ctx, loc, "m"); !errors.Is(err, ErrNoJournal) {
		t.Errorf("finish without a journal: %v", err)
	}
	j := &Journal{Name: "m", Cutover: &CutoverRecord{Step: CutoverQuiesced}}
	if err := j.save(ctx, loc); err != nil {
		t.Fatal(err)
	}
	if _, err := Finish(ctx, loc, "m"); err == nil || !strings.Contains(err.Error(), "at step Quiesced") {
		t.Errorf("finish of a cutover at Quiesced: %v", err)
	}
	j.Cutover.Step, j.Cutover.Phase = CutoverDone, v1alpha1.PhasePartiallyFailed
	if err := j.save(ctx, loc); err != nil {
		t.Fatal(err)
	}
	if _, err := Finish(ctx, loc, "m"); err == nil || !strings.Contains(err.Error(), "PartiallyFailed") {
		t.Errorf("finish of a PartiallyFailed cutover: %v", err)
	}
	j.Cutover.Phase = v1alpha1.PhaseCompleted
	if err := j.save(ctx, loc); err != nil {
		t.Fatal(err)
	}
	if _, err := Finish(ctx, loc, "m"); err != nil {
		t.Fatal(err)
	}
	o := Options{Name: "m", Location: loc}
	if _, err := Rollback(ctx, o, RollbackOptions{}); !errors.Is(err, ErrFinished) {
		t.Errorf("rollback after done: %v", err)
	}
	if _, err := Finish(ctx, loc, "m"); !errors.Is(err, ErrFinished) {
		t.Errorf("second done: %v", err)
	}
}

// TestSameSpecs: a later stage or a cutover given another selection or
// mapping than the first stage's is refused, naming the spec field; one
// given none, or the same, runs with the journal's.
func TestSameSpecs(t *testing.T) {
	j := &Journal{Name: "m"}
	j.Backup.IncludedNamespaces = []string{"shop"}
	j.Restore.NamespaceMapping = map[string]string{"shop": "shop2"}
	o := &Options{}
	if err := sameSpecs(j, o); err != nil {
		t.Errorf("nothing given: %v", err)
	}
	o.Backup.Spec.IncludedNamespaces = []string{"shop"}
	if err := sameSpecs(j, o); err != nil {
		t.Errorf("the same namespaces: %v", err)
	}
	o.Backup.Spec.IncludedNamespaces = []string{"shop", "blog"}
	if err := sameSpecs(j, o); err == nil || !strings.Contains(err.Error(), "spec.includedNamespaces [blog shop] differs from its first stage's ([shop])") {
		t.Errorf("other namespaces: %v", err)
	}
	j.Backup.IncludedNamespaces = []string{"blog", "shop"}
	o.Backup.Spec.IncludedNamespaces = []string{"shop", "blog", "shop"}
	if err := sameSpecs(j, o); err != nil {
		t.Errorf("the same namespaces in another order: %v", err)
	}
	o.Backup.Spec.IncludedNamespaces = nil
	o.Restore.Spec.NamespaceMapping = map[string]string{"shop": "other"}
	if err := sameSpecs(j, o); err == nil || !strings.Contains(err.Error(), "spec.namespaceMapping") {
		t.Errorf("another mapping: %v", err)
	}
}

// TestRollbackTargetNotStopped: a rollback whose target copies cannot be
// stopped (reachable, but a scale refused) leaves the source quiesced, so
// the two never both run, and says so; run again once the target takes
// the scale, it puts the source back.
func TestRollbackTargetNotStopped(t *testing.T) {
	ctx := context.Background()
	two := int32(2)
	objs := func() []any {
		return []any{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{v1alpha1.LabelRestore: "m-cutover-1"}},
			Spec: appsv1.DeploymentSpec{Replicas: &two}}}
	}
	srcClient, dstClient := fakeClient(objs()), fakeClient(objs())
	loc, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	o := &Options{Name: "m", Source: &kube.Cluster{Name: "src", Typed: srcClient}, Target: &kube.Cluster{Name: "dst", Typed: dstClient}, Location: loc}
	o.complete()
	j := &Journal{Name: "m", Cutovers: 1, Cutover: &CutoverRecord{Name: "m-cutover-1", Step: CutoverPredicted}}
	j.Backup.IncludedNamespaces = []string{"shop"}
	if err := quiesce(ctx, o, CutoverOptions{QuiesceTimeout: 5 * time.Second}, j); err != nil {
		t.Fatal(err)
	}
	// A copy that cannot be read: whether it runs is not known.
	unreadable := true
	dstClient.PrependReactor("get", "deployments", func(_ ktesting.Action) (bool, runtime.Object, error) {
		if unreadable {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	if _, err := Rollback(ctx, *o, RollbackOptions{}); err == nil || !strings.Contains(err.Error(), "request timed out") {
		t.Fatalf("rollback whose target copy cannot be read: %v", err)
	}
	if d, _ := srcClient.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{}); *d.Spec.Replicas != 0 {
		t.Errorf("the source's web runs at %d while the target's copy may too", *d.Spec.Replicas)
	}
	unreadable = false
	refuse := true
	dstClient.PrependReactor("patch", "deployments", func(_ ktesting.Action) (bool, runtime.Object, error) {
		if refuse {
			return true, nil, errors.New(`deployments.apps "web" is forbidden: admission webhook denied the request`)
		}
		return false, nil, nil
	})
	_, err = Rollback(ctx, *o, RollbackOptions{})
	if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "source stays quiesced") {
		t.Fatalf("rollback whose target copy cannot be stopped: %v", err)
	}
	if d, _ := srcClient.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{}); *d.Spec.Replicas != 0 {
		t.Errorf("the source's web runs at %d while the target's copy may too", *d.Spec.Replicas)
	}
	if got, _ := LoadJournal(ctx, loc, "m"); got.Cutover == nil || got.Cutover.Step != CutoverRolling {
		t.Errorf("journal after the failed rollback: %+v", got)
	}
	refuse = false
	if _, err := Rollback(ctx, *o, RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	if d, _ := srcClient.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{}); *d.Spec.Replicas != 2 {
		t.Errorf("web at %d after the second rollback, want 2", *d.Spec.Replicas)
	}
}

// TestStageRespec: until a stage finishes, a stage given other specs
// replaces the first stage's (a wrong mapping is corrected by running the
// stage again); once one finished, other specs are refused.
func TestStageRespec(t *testing.T) {
	ctx := context.Background()
	loc, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	j := &Journal{Name: "m", SourceID: "a", TargetID: "b", Stages: []StageRecord{{Number: 1, Name: "m-stage-1", Started: time.Now(), Ended: time.Now(), Error: "claim shop/data: storage class fast not found"}}}
	j.Backup.IncludedNamespaces = []string{"shop"}
	j.Restore.StorageClassMapping = map[string]string{"standard": "fast"}
	if err := j.save(ctx, loc); err != nil {
		t.Fatal(err)
	}
	o := &Options{Name: "m", Location: loc}
	o.complete()
	o.Backup.Spec.IncludedNamespaces = []string{"shop"}
	o.Restore.Spec.StorageClassMapping = map[string]string{"standard": "premium"}
	got, err := stageJournal(ctx, o)
	if err != nil || got.Restore.StorageClassMapping["standard"] != "premium" || got.SourceID != "" {
		t.Fatalf("after a failed first stage, other specs: %+v %v", got, err)
	}
	got.Stages[0].Error = "" // it finished
	if err := got.save(ctx, loc); err != nil {
		t.Fatal(err)
	}
	o.Restore.Spec.StorageClassMapping = map[string]string{"standard": "other"}
	if _, err := stageJournal(ctx, o); err == nil || !strings.Contains(err.Error(), "spec.storageClassMapping") {
		t.Errorf("after a finished stage, other specs: %v", err)
	}
}

// TestCutoverCopyLongName: a copy is told by its restore label, which a
// long migration name is cut to (with a hash): a 60-character name's
// copies are found, a workload of another migration's is not.
func TestCutoverCopyLongName(t *testing.T) {
	ctx := context.Background()
	name := strings.Repeat("m", 60)
	label := func(restore string) map[string]string {
		return map[string]string{v1alpha1.LabelRestore: transform.LabelValue(restore)}
	}
	dst := fakeClient([]any{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: label(name + "-cutover-2")}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "other", Labels: label(name + "x-cutover-2")}},
	})
	j := &Journal{Name: name, Cutovers: 2}
	if ok, _, err := j.cutoverCopy(ctx, dst, v1alpha1.QuiescedWorkload{Kind: "Deployment", Namespace: "shop", Name: "web"}); !ok || err != nil {
		t.Error("the copy of a long-named migration's cutover 2 is not found")
	}
	if ok, _, err := j.cutoverCopy(ctx, dst, v1alpha1.QuiescedWorkload{Kind: "Deployment", Namespace: "shop", Name: "other"}); ok || err != nil {
		t.Error("another migration's workload is taken for a copy")
	}
}
