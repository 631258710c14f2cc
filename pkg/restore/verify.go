package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/transform"
	"github.com/kubeferry/ferry/pkg/volumes"
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
	opts.keepFiltered = true
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	a, b, err := loadBackup(ctx, loc, &opts)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	plan, err := buildPlan(a.Items, &opts)
	if err != nil {
		return nil, err
	}
	results := &report.Results{}
	ap := newApplier(cluster, &opts, b.Name, plan, results)
	ap.verifying = true
	// Image references are expected as the restore rewrote them: mapped,
	// and pinned to the digests the backup's images file recorded.
	rec, err := images.LoadRecord(ctx, loc, b)
	if err != nil && !errors.Is(err, images.ErrNoImages) {
		return nil, err
	}
	if len(opts.Spec.ImageRegistryMappings) > 0 {
		mappings, err := images.ParseMappings(opts.Spec.ImageRegistryMappings)
		if err != nil {
			return nil, err
		}
		var digests map[string]string
		if rec != nil {
			digests = rec.Digests()
		}
		ap.tctx.Images = images.NewRewriter(mappings, digests)
		ap.tctx.OnImageError = func(err error) { results.Warnf("%v", err) }
	}
	if err := ap.run(ctx); err != nil {
		return nil, err
	}
	vrec, err := volumes.LoadBackupRecord(ctx, loc, b.Name)
	if err != nil {
		return nil, err
	}
	v := report.NewVerification(b.Name, results)
	if rec != nil {
		v.Images = imageArtifacts(rec)
	}
	if vrec != nil {
		v.Volumes = volumeArtifacts(vrec)
	}
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

// imageArtifacts are the report's image rows: each image of the backup's
// images file with its digest and what the backup did with it.
func imageArtifacts(rec *images.Record) []report.Artifact {
	var out []report.Artifact
	for _, im := range rec.Images {
		a := report.Artifact{Name: im.Reference, Detail: im.Digest, Outcome: "recorded"}
		switch {
		case im.Error != "":
			a.Outcome, a.Message = "failed", im.Error
		case im.Bundled:
			a.Outcome = "bundled"
		case im.Copy != nil:
			a.Outcome, a.Message = "copied", im.Copy.Target
		}
		if len(im.UsedBy) > 0 {
			if a.Message != "" {
				a.Message += "; "
			}
			a.Message += fmt.Sprintf("used by %d container(s)", len(im.UsedBy))
		}
		if refs := rec.Referrers()[im.Digest]; len(refs) > 0 && im.Error == "" {
			ds := make([]string, len(refs))
			for i, r := range refs {
				ds[i] = r.Digest
			}
			a.Message += fmt.Sprintf("; %d referrers (signatures, attestations, SBOMs): %s", len(refs), strings.Join(ds, ", "))
		}
		out = append(out, a)
	}
	for _, m := range rec.Malformed {
		out = append(out, report.Artifact{Name: m, Outcome: "malformed"})
	}
	return out
}

// volumeArtifacts are the report's volume rows: each pod volume the
// backup copied (snapshot, files, bytes) or failed, and those it skipped.
func volumeArtifacts(rec *volumes.BackupRecord) []report.Artifact {
	var out []report.Artifact
	for _, pv := range rec.Volumes {
		a := report.Artifact{Name: pv.Namespace + "/" + pv.Pod + " " + pv.Volume, Outcome: "backed up"}
		switch {
		case pv.Error != "":
			a.Outcome, a.Message = "failed", pv.Error
		case pv.SnapshotResult != nil:
			a.Detail = "snapshot " + pv.SnapshotID
			a.Message = fmt.Sprintf("%d files, %d bytes", pv.Files, pv.Bytes)
		}
		out = append(out, a)
	}
	for _, s := range rec.Skipped {
		out = append(out, report.Artifact{Name: s.Namespace + "/" + s.Pod + " " + s.Volume, Outcome: "skipped", Message: s.Reason})
	}
	return out
}

// verify compares one planned item with the target (see Verify).
func (a *applier) verify(ctx context.Context, it *Item) report.Result {
	res, why := a.resolve(it)
	if why != "" {
		// The restore could not write it: the target lacks the object.
		a.unserved.Store(it.GroupResource, why)
		return report.Result{Outcome: report.Missing, Reason: "version not served", Message: "not restorable: " + why}
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
	it.setTargetUID(string(cur.GetUID()))
	live := liveForCompare(cur)
	d := comparable(u)
	same, where := contains(live.Object, d.Object, "")
	pruned, added := pruneAdded(live, d)
	if !same && it.GroupResource == "services" {
		// The restore gives a Service new node ports when the ones it kept
		// are taken in the target (a warning at restore time): a change on
		// purpose.
		alt := d.DeepCopy()
		transform.ClearNodePorts(alt)
		if ok, _ := contains(live.Object, alt.Object, ""); ok {
			same, d = true, alt
			pruned, added = pruneAdded(live, d)
			changes = append(changes, "node ports taken in the target when restored: new ones allocated")
		}
	}
	if same && len(added) == 0 {
		return report.Result{Outcome: report.Match, Version: res.Version, Changes: changes}
	}
	msg := fmt.Sprintf("first difference at %s", where)
	if same {
		msg = "only in the target: " + strings.Join(added, ", ")
		if len(added) > 3 {
			msg = fmt.Sprintf("only in the target: %s and %d more", strings.Join(added[:3], ", "), len(added)-3)
		}
	}
	expected := &unstructured.Unstructured{Object: overlay(pruned.Object, d.Object).(map[string]any)}
	return report.Result{Outcome: report.Differs, Version: res.Version, Message: msg, Diff: diffAs("target", "expected", live, expected), Changes: changes}
}

// liveForCompare is the target's object as a comparison sees it: a Pod
// without the service-account token volume its admission injected
// (transform.DropTokenVolumes), which the restore drops from the backup's,
// and without the ferry-restore-wait init container a restore of its
// volume data added (transform.PodVolumes).
func liveForCompare(cur *unstructured.Unstructured) *unstructured.Unstructured {
	if cur.GetKind() != "Pod" {
		return cur
	}
	live := cur.DeepCopy()
	transform.DropTokenVolumes(live)
	if inits, ok, _ := unstructured.NestedSlice(live.Object, "spec", "initContainers"); ok {
		kept := inits[:0]
		for _, c := range inits {
			if m, _ := c.(map[string]any); m["name"] != v1alpha1.RestoreWaitContainer {
				kept = append(kept, c)
			}
		}
		if len(kept) == 0 {
			unstructured.RemoveNestedField(live.Object, "spec", "initContainers")
		} else {
			_ = unstructured.SetNestedSlice(live.Object, kept, "spec", "initContainers")
		}
	}
	return live
}
