// Package restore owns restoring: it restores a stored backup into a
// cluster (Run), or compares a cluster with what a restore of the backup
// would write (Verify). A restore is a pipeline of small stages: load
// (backup.Load fetches and verifies the whole archive before anything is
// written, spooling the items' bytes to local disk), plan (filters,
// mappings, what is left to controllers, order), transform
// (pkg/transform), and apply (concurrent inside each tier, one API call
// per created object, each object read back from the spool), ending in
// per-item results.
package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/modifiers"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/transform"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// Options configure one restore.
type Options struct {
	Name string
	Spec v1alpha1.RestoreSpec
	// Workers is the number of concurrent API calls inside a tier; default 32.
	Workers int
	// CRDTimeout bounds the wait for restored CRDs to be Established; default 60s.
	CRDTimeout time.Duration
	// Deadline bounds the whole restore; a restore that reaches it is
	// recorded Failed, as an interrupted one, and run again finishes it.
	Deadline deadline.Deadline
	// VerifyDeadline bounds the verification after the restore
	// (migration.Run's, migration.VerifyAndRecord's).
	VerifyDeadline deadline.Deadline
	// OnProgress, if set, is called as items finish.
	OnProgress func(done, total int)
	// PodVolumes, if set, restores pod volume data in this process.
	PodVolumes *PodVolumeOptions
	Log        *slog.Logger
	// keepFiltered keeps the items the filters leave out in the plan, as
	// skipped with the reason (Verify lists them).
	keepFiltered bool
	// Images configures registry access for spec.pushImages.
	Images images.Options
	// OnDryRun, if set, is called in a dry run with each object as the
	// restore would write it (its transforms applied) and its
	// group-resource, from several goroutines at once: the pre-flight
	// check reads them.
	OnDryRun func(resource string, u *unstructured.Unstructured)
}

func (o *Options) mapNamespace(ns string) string {
	if t, ok := o.Spec.NamespaceMapping[ns]; ok && t != "" {
		return t
	}
	return ns
}

// ErrBackupNotRestorable is wrapped when the backup is missing, incomplete
// or failed, or its data does not verify: backup.ErrNotRestorable, which
// backup.Load wraps, under the name a restore's callers test for.
var ErrBackupNotRestorable = backup.ErrNotRestorable

// Validate checks the options before anything is read or written.
func (o *Options) Validate() error {
	if err := store.ValidateRestoreName(o.Name); err != nil {
		return err
	}
	if err := o.Deadline.Validate(); err != nil {
		return err
	}
	if err := o.VerifyDeadline.Validate(); err != nil {
		return err
	}
	if o.Spec.PreflightOnly && o.Spec.DryRun {
		return errors.New("spec.preflightOnly checks the restore without running it, with dry-run creates of its own: spec.dryRun cannot go with it")
	}
	if o.Spec.PreflightOnly && o.Spec.Verify {
		return errors.New("spec.preflightOnly checks the restore without running it: there is nothing for spec.verify to verify")
	}
	if err := store.ValidateBackupName(o.Spec.BackupName); err != nil && o.Spec.BackupName != "" {
		return err
	}
	spec := field.NewPath("spec")
	if o.Spec.BackupName == "" {
		return fmt.Errorf("restore %s: %w", o.Name, field.Required(spec.Child("backupName"), "the backup to restore"))
	}
	if o.Spec.Verify && o.Spec.DryRun {
		return field.Invalid(spec.Child("verify"), true, "a dry run (spec.dryRun) restores nothing to verify, and writes no report")
	}
	if rt := o.Spec.VerifyRuntime; rt != nil && rt.Timeout != nil && rt.Timeout.Duration < 0 {
		return field.Invalid(spec.Child("verifyRuntime", "timeout"), rt.Timeout.Duration.String(), "must not be negative")
	}
	if o.CRDTimeout < 0 {
		return field.Invalid(spec.Child("crdTimeout"), o.CRDTimeout.String(), "must not be negative")
	}
	switch o.Spec.ExistingResourcePolicy {
	case "", v1alpha1.PolicyNone, v1alpha1.PolicyUpdate:
	default:
		return field.NotSupported(spec.Child("existingResourcePolicy"), o.Spec.ExistingResourcePolicy, []v1alpha1.ExistingResourcePolicy{v1alpha1.PolicyNone, v1alpha1.PolicyUpdate})
	}
	switch o.Spec.ExistingVolumeDataPolicy {
	case "", v1alpha1.VolumeDataWrite, v1alpha1.VolumeDataKeep:
	default:
		return field.NotSupported(spec.Child("existingVolumeDataPolicy"), o.Spec.ExistingVolumeDataPolicy, []v1alpha1.ExistingVolumeDataPolicy{v1alpha1.VolumeDataWrite, v1alpha1.VolumeDataKeep})
	}
	for _, c := range []struct{ field, name string }{{"fromCloud", o.Spec.FromCloud}, {"toCloud", o.Spec.ToCloud}} {
		if c.name == "" {
			continue
		}
		if _, err := transform.LoadCloudProfile(c.name); err != nil {
			return fmt.Errorf("%w: %w", field.Invalid(spec.Child(c.field), c.name, ""), err)
		}
	}
	if o.Spec.ResourceModifiers != "" {
		if _, err := modifiers.Parse([]byte(o.Spec.ResourceModifiers)); err != nil {
			return fmt.Errorf("%w: %w", field.Invalid(spec.Child("resourceModifiers"), field.OmitValueType{}, ""), err)
		}
	}
	if _, err := images.ParseMappings(o.Spec.ImageRegistryMappings); err != nil {
		return fmt.Errorf("%w: %w", field.Invalid(spec.Child("imageRegistryMappings"), o.Spec.ImageRegistryMappings, ""), err)
	}
	if o.Spec.PushImages && len(o.Spec.ImageRegistryMappings) == 0 {
		return field.Required(spec.Child("imageRegistryMappings"), "spec.pushImages needs the target registries (OLD=NEW)")
	}
	return validateNamespaceMapping(spec.Child("namespaceMapping"), o.Spec.NamespaceMapping)
}

// validateNamespaceMapping checks that every name of m is a namespace
// name and that no two sources map to one target.
func validateNamespaceMapping(path *field.Path, m map[string]string) error {
	targets := map[string]string{}
	for _, src := range slices.Sorted(maps.Keys(m)) {
		dst := m[src]
		if other, dup := targets[dst]; dup {
			return field.Invalid(path.Key(src), dst, fmt.Sprintf("%s is mapped to %s too; a target namespace takes one source", other, dst))
		}
		targets[dst] = src
		for _, n := range []string{src, dst} {
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				return field.Invalid(path.Key(src), dst, fmt.Sprintf("%q: %s", n, errs[0]))
			}
		}
	}
	return nil
}

// Run restores backup opts.Spec.BackupName from loc into cluster. The
// archive is fully verified before the first write. The returned error
// is non-nil when the restore could not run at all (bad options, missing
// or damaged backup); a restore that ran reports its phase in the status.
// Within opts.Deadline: a restore cut short by it is recorded Failed,
// naming it.
func Run(ctx context.Context, cluster *kube.Cluster, loc *store.Location, opts Options) (*v1alpha1.Restore, *report.Results, error) {
	ctx, cancel := opts.Deadline.Context(ctx, "restore")
	defer cancel()
	r, results, err := restoreWithin(ctx, cluster, loc, opts)
	return r, results, deadline.Cause(ctx, err)
}

// restoreWithin is Run within the deadline.
func restoreWithin(ctx context.Context, cluster *kube.Cluster, loc *store.Location, opts Options) (*v1alpha1.Restore, *report.Results, error) {
	opts.defaults()
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	r, prev, err := newRecord(ctx, cluster, loc, &opts)
	if err != nil {
		return nil, nil, err
	}
	start := *r.Status.StartTimestamp
	results := &report.Results{}
	var hb *heartbeat
	if !opts.Spec.DryRun {
		// From here on the location says the restore runs; a run killed
		// before its outcome leaves it InProgress, and Interrupted.
		if hb, err = startHeartbeat(ctx, loc, r); err != nil {
			return nil, nil, err
		}
	}
	// This fail stops the heartbeat, then calls the package's fail, which
	// writes the outcome.
	fail := func(ctx context.Context, loc *store.Location, r *v1alpha1.Restore, results *report.Results, err error) (*v1alpha1.Restore, *report.Results, error) {
		hb.Stop()
		return fail(ctx, loc, r, results, err)
	}

	a, b, err := loadBackup(ctx, loc, &opts)
	if err != nil {
		return fail(ctx, loc, r, results, err)
	}
	defer a.Close() // removes the spool file of the items' bytes
	opts.Log.Info("archive verified", "backup", b.Name, "items", len(a.Items))
	plan, err := buildPlan(a.Items, &opts)
	if err != nil {
		return fail(ctx, loc, r, results, err)
	}
	rw, err := imageStage(ctx, loc, b, &opts, r, results)
	if err != nil {
		return fail(ctx, loc, r, results, err)
	}
	ap := newApplier(cluster, &opts, b.Name, plan, results)
	ap.tctx.Images = rw
	ap.tctx.OnImageError = func(err error) {
		if opts.Spec.ImagesRequired {
			results.Errorf("%v", err)
		} else {
			results.Warnf("%v", err)
		}
	}
	pv, err := startPodVolumes(ctx, cluster, loc, b.Name, plan, ap, &opts, r, prev)
	if err != nil {
		return fail(ctx, loc, r, results, err)
	}
	if err := ap.run(ctx); err != nil {
		results.Errorf("%v", err)
		r.Status.FailureReason = err.Error()
	}
	pv.finish(ctx, cluster, ap, &opts, r)
	if !opts.Spec.DryRun && r.Status.FailureReason == "" && ctx.Err() == nil {
		hooksStart := time.Now()
		runRestoreHooks(ctx, cluster, plan, &opts, results)
		opts.Log.Info("post-restore hooks done", "took", time.Since(hooksStart).Round(time.Millisecond))
	}
	end := metav1.Now()
	r.Status.CompletionTimestamp = &end
	setOutcome(ctx, r, results)
	// The record is written even when the restore was interrupted; a dry
	// run writes nothing at all.
	hb.Stop()
	if !opts.Spec.DryRun {
		if err := record(ctx, loc, r, results, pv.out); err != nil {
			return r, results, err
		}
	}
	opts.Log.Info("restore done", "restore", r.Name, "phase", r.Status.Phase, "took", end.Sub(start.Time).Round(time.Millisecond))
	return r, results, nil
}

// defaults fills in what o leaves unset.
func (o *Options) defaults() {
	if o.Workers <= 0 {
		o.Workers = 32
	}
	if o.CRDTimeout <= 0 {
		o.CRDTimeout = 60 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if p := o.PodVolumes; p != nil {
		if p.HelperImage == "" {
			p.HelperImage = DefaultRestoreHelperImage
		}
		if p.Wait <= 0 {
			p.Wait = 10 * time.Minute
		}
	}
	if o.Spec.ExistingResourcePolicy == "" {
		o.Spec.ExistingResourcePolicy = v1alpha1.PolicyNone
	}
	if o.Spec.ExistingVolumeDataPolicy == "" {
		o.Spec.ExistingVolumeDataPolicy = v1alpha1.VolumeDataWrite
	}
}

// newRecord starts the record of restore opts.Name, refusing a name a
// restore that Completed already has in loc. prev is the earlier run of a
// Failed, PartiallyFailed or interrupted restore of that name, or nil:
// this run takes over its UID, so that what it did (claims it filled,
// pods that wait for its done-markers) counts as this run's. An earlier run whose record is
// InProgress is watched (awaitEarlierRun): one that is alive is not
// raced, one that was killed is finished.
func newRecord(ctx context.Context, cluster *kube.Cluster, loc *store.Location, opts *Options) (r, prev *v1alpha1.Restore, err error) {
	prev, err = loc.GetRestore(ctx, opts.Name)
	if err == nil && !opts.Spec.DryRun && prev.Status.Phase == v1alpha1.PhaseInProgress {
		opts.Log.Info("an earlier run of this restore is InProgress: watching its heartbeat", "restore", opts.Name, "for", HeartbeatStale)
		if prev, err = awaitEarlierRun(ctx, loc, opts.Name, prev); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case opts.Spec.DryRun:
		// A dry run records nothing, so its name may be any.
		prev = nil
	case err == nil && prev.Status.Phase == v1alpha1.PhaseInProgress:
		opts.Log.Info("the earlier run of this restore was interrupted (its heartbeat stopped): finishing it", "restore", opts.Name)
	case err == nil && prev.Status.Phase != v1alpha1.PhaseFailed && prev.Status.Phase != v1alpha1.PhasePartiallyFailed:
		return nil, nil, fmt.Errorf("restore %q already exists in %s (%s)", opts.Name, loc.URL(), prev.Status.Phase)
	case err == nil:
		// A Failed, PartiallyFailed or interrupted restore may be run again
		// under its name once the cause is fixed: what it applied comes out
		// unchanged, and what failed (a claim whose helper could not run, a
		// workload held back for it) is done now.
	case !errors.Is(err, store.ErrNotFound):
		return nil, nil, err
	default:
		prev = nil
	}
	r = v1alpha1.NewRestore(opts.Name)
	r.Spec = opts.Spec
	r.UID = uuid.NewUUID()
	if prev != nil && prev.UID != "" {
		r.UID = prev.UID
	}
	start := metav1.Now()
	r.CreationTimestamp = start
	r.Status.StartTimestamp = &start
	r.Status.TargetCluster = &v1alpha1.ClusterInfo{Server: cluster.Config.Host, GitVersion: cluster.Version.GitVersion}
	return r, prev, nil
}

// podVolumeRun is the pod volume data of one restore: the backup's
// volume record (nil when there is none to restore), and what was
// restored through claims (claimSum) and in all (out).
type podVolumeRun struct {
	rec      *volumes.BackupRecord
	claimSum *v1alpha1.PodVolumeSummary
	out      []volumes.PodVolumeRestore
}

// startPodVolumes reads the backup's volume record and prepares ap to
// restore the data: restored pods wait for it, and claims whose data
// helper pods restore are filled before the workloads that mount them.
// The error is non-nil when the data cannot be restored (so nothing is).
func startPodVolumes(ctx context.Context, cluster *kube.Cluster, loc *store.Location, backupName string, plan *Plan, ap *applier, opts *Options, r, prev *v1alpha1.Restore) (*podVolumeRun, error) {
	results := ap.results
	pv := &podVolumeRun{}
	if !opts.Spec.DryRun && !opts.Spec.FromVelero {
		var err error
		if pv.rec, err = volumes.LoadBackupRecord(ctx, loc, backupName); err != nil {
			return nil, err
		}
	}
	switch {
	case pv.rec == nil || len(pv.rec.Volumes) == 0:
		pv.rec = nil // nothing to restore (a record of skipped volumes only)
	case opts.PodVolumes == nil:
		results.Errorf("backup %s holds the data of %d pod volumes (%s); it is not restored: no volume repository password was given (a repository password file, or $%s)", backupName, len(pv.rec.Volumes), volumeList(pv.rec), volumes.EnvPassword)
		pv.rec = nil
	case opts.PodVolumes.Check != nil:
		if err := opts.PodVolumes.Check(ctx); err != nil {
			return nil, fmt.Errorf("the data of %s cannot be restored, so nothing was restored: %w", volumeList(pv.rec), err)
		}
		fallthrough
	default:
		// r.UID is the earlier run's for a re-run (newRecord): the pods it
		// already made wait for this UID's markers.
		ap.tctx.PodVolumeRestore = planPodVolumes(pv.rec, plan, opts, string(r.UID), results)
	}
	if pv.rec != nil && opts.PodVolumes.Claims != nil {
		skipDataPVs(plan, pv.rec, opts.PodVolumes)
		ap.beforeWorkloads = func(ctx context.Context) func(*Item) string {
			pv.claimSum, pv.out = restoreClaims(ctx, cluster.Typed, pv.rec, plan, opts, string(r.UID), results)
			return holdWorkloads(pv.out, opts)
		}
	}
	return pv, nil
}

// finish restores the pod volume data that is left to this process once
// the objects are applied, and sums it up in r's status.
func (pv *podVolumeRun) finish(ctx context.Context, cluster *kube.Cluster, ap *applier, opts *Options, r *v1alpha1.Restore) {
	switch {
	case pv.rec == nil || r.Status.FailureReason != "" || ctx.Err() != nil:
		r.Status.PodVolumes = pv.claimSum
	case opts.PodVolumes.ByNodeAgent:
		n := 0
		for _, v := range ap.tctx.PodVolumeRestore.Volumes {
			n += len(v)
		}
		r.Status.PodVolumes = &v1alpha1.PodVolumeSummary{Total: n, Deferred: n}
	default:
		var out []volumes.PodVolumeRestore
		r.Status.PodVolumes, out = restorePodVolumes(ctx, cluster, pv.rec, ap.tctx.PodVolumeRestore, opts, ap.results, pv.claimSum)
		pv.out = append(pv.out, out...)
	}
}

// setOutcome sets r's counts, phase and retries from results.
func setOutcome(ctx context.Context, r *v1alpha1.Restore, results *report.Results) {
	r.Status.Counts = v1alpha1.RestoreCounts{
		Created: results.Count(report.Created), Updated: results.Count(report.Updated), Unchanged: results.Count(report.Unchanged),
		Skipped: results.Count(report.Skipped), Failed: results.Count(report.Failed),
	}
	r.Status.Warnings = len(results.Warnings)
	r.Status.Errors = len(results.Errors) + r.Status.Counts.Failed
	switch {
	case r.Status.FailureReason != "":
		r.Status.Phase = v1alpha1.PhaseFailed
	case r.Status.Errors > 0:
		r.Status.Phase = v1alpha1.PhasePartiallyFailed
	default:
		r.Status.Phase = v1alpha1.PhaseCompleted
	}
	r.Status.Retries = &v1alpha1.RetryCounts{ObjectStore: store.Retries(), APIServer: kube.Retries(), Registry: images.Retries()}
	if ctx.Err() != nil {
		r.Status.Phase = v1alpha1.PhaseFailed
		r.Status.FailureReason = "interrupted: " + deadline.Cause(ctx, ctx.Err()).Error() + "; run the same restore again to finish it"
	}
}

// record writes the restore's volume records, results and record to loc,
// also when ctx was canceled (an interrupted restore is recorded).
func record(ctx context.Context, loc *store.Location, r *v1alpha1.Restore, results *report.Results, volOut []volumes.PodVolumeRestore) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if len(volOut) > 0 {
		if err := loc.PutJSON(sctx, store.RestoreVolumesKey(r.Name), volOut); err != nil {
			results.Warnf("restore volume records not saved: %v", err)
		}
	}
	return save(sctx, loc, r, results)
}

// fail records a restore that could not start and returns err.
func fail(ctx context.Context, loc *store.Location, r *v1alpha1.Restore, results *report.Results, err error) (*v1alpha1.Restore, *report.Results, error) {
	now := metav1.Now()
	r.Status.Phase = v1alpha1.PhaseFailed
	r.Status.FailureReason = err.Error()
	r.Status.CompletionTimestamp = &now
	r.Status.Errors = 1
	results.Errorf("%v", err)
	if ctx.Err() != nil {
		r.Status.FailureReason = "interrupted: " + deadline.Cause(ctx, err).Error() + "; run the same restore again to finish it"
	}
	if !r.Spec.DryRun {
		// Written also when ctx was canceled (Ctrl-C): the record must not
		// stay InProgress.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = save(sctx, loc, r, results)
	}
	return r, results, err
}

func save(ctx context.Context, loc *store.Location, r *v1alpha1.Restore, results *report.Results) error {
	if err := loc.PutSealedJSON(ctx, store.RestoreResultsKey(r.Name), results); err != nil {
		return err
	}
	return Record(ctx, loc, r)
}

// Record writes r as restore r.Name's record in the location (its
// ferry-restore.json), as the restore left it or as a verification
// changed it.
func Record(ctx context.Context, loc *store.Location, r *v1alpha1.Restore) error {
	return loc.PutJSON(ctx, store.RestoreDir(r.Name)+store.RestoreMarker, r)
}

// loadBackup loads and verifies the backup opts.Spec names (backup.Load,
// or backup.LoadVelero for a backup made by Velero). The caller must
// Close the archive.
func loadBackup(ctx context.Context, loc *store.Location, opts *Options) (*archive.Archive, *v1alpha1.Backup, error) {
	if opts.Spec.FromVelero {
		return backup.LoadVelero(ctx, loc, opts.Spec.BackupName)
	}
	return backup.Load(ctx, loc, opts.Spec.BackupName)
}

// volumeList names the claims and pod volumes of rec, for errors.
func volumeList(rec *volumes.BackupRecord) string {
	var names []string
	seen := map[string]bool{}
	for _, v := range rec.Volumes {
		n := "pod volume " + v.Key()
		if v.ClaimName != "" {
			n = "claim " + v.Namespace + "/" + v.ClaimName
		}
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if len(names) > 10 {
		names = append(names[:10], fmt.Sprintf("and %d more", len(names)-10))
	}
	return strings.Join(names, ", ")
}
