package restore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

// Verify compares every object of backup opts.Spec.BackupName with
// cluster and returns the verification report. Each object is first put
// through what the restore does to it (the same plan, version choice,
// transforms and resource modifiers, from opts.Spec), so that only
// unexpected differences show: an object is a Match when the target's
// holds every field the expected object sets (server defaults and
// controller fields may be added; ferry's own labels and status are not
// compared), Differs otherwise (with the first differing field and a
// unified diff; Secret values are redacted), Missing when the target has
// no such object, and Skipped when the plan does not restore it (with the
// plan's reason). Nothing is written to the cluster or the store.
//
// The archive is verified against its digests first, as for a restore.
// The error is non-nil when the backup cannot be read or the cluster
// cannot be discovered.
func Verify(ctx context.Context, cluster *kube.Cluster, loc *store.Location, opts Options) (*report.Verification, error) {
	start := time.Now()
	if opts.Workers <= 0 {
		opts.Workers = 32
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		opts.Name = "verify"
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	load := Load
	if opts.Spec.FromVelero {
		load = LoadVelero
	}
	a, b, err := load(ctx, loc, opts.Spec.BackupName)
	if err != nil {
		return nil, err
	}
	plan, err := buildPlan(a.Items, &opts)
	if err != nil {
		return nil, err
	}
	results := &report.Results{}
	ap := newApplier(cluster, &opts, b.Name, plan, results)
	ap.verifying = true
	if err := ap.run(ctx); err != nil {
		return nil, err
	}
	v := report.NewVerification(b.Name, results)
	v.TargetServer = cluster.Config.Host
	if b.Status.SourceCluster != nil {
		v.SourceServer = b.Status.SourceCluster.Server
	}
	if s, e := b.Status.StartTimestamp, b.Status.CompletionTimestamp; s != nil && e != nil {
		v.Timings = append(v.Timings, report.NewTiming("backup", s.Time, e.Time))
	}
	v.Timings = append(v.Timings, report.NewTiming("verify", start, time.Now()))
	return v, nil
}

// verify compares one planned item with the target (see Verify).
func (a *applier) verify(ctx context.Context, it *Item) report.Result {
	res, why := a.resolve(it)
	if why != "" {
		a.unserved.Store(it.GroupResource, why)
		return report.Result{Outcome: report.Skipped, Reason: "version not served", Message: why}
	}
	u, changes, failed := a.desired(it, res)
	if failed != nil {
		return *failed
	}
	var client dynamic.ResourceInterface = a.cluster.Dynamic.Resource(res.GroupVersionResource)
	if res.Namespaced {
		client = a.cluster.Dynamic.Resource(res.GroupVersionResource).Namespace(u.GetNamespace())
	}
	cur, err := client.Get(ctx, u.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return report.Result{Outcome: report.Missing, Version: res.Version, Message: "not in the target", Changes: changes}
	case err != nil:
		return report.Result{Outcome: report.Failed, Version: res.Version, Reason: string(apierrors.ReasonForError(err)), Message: "reading the target's object: " + err.Error()}
	}
	// Dependents expect their owners' UIDs in the target.
	a.uids.Store(it.peek.Metadata.UID, string(cur.GetUID()))
	d := comparable(u)
	same, where := contains(cur.Object, d.Object, "")
	if same {
		return report.Result{Outcome: report.Match, Version: res.Version, Changes: changes}
	}
	expected := &unstructured.Unstructured{Object: overlay(cur.Object, d.Object).(map[string]any)}
	return report.Result{Outcome: report.Differs, Version: res.Version, Message: fmt.Sprintf("first difference at %s", where), Diff: diff(cur, expected), Changes: changes}
}
