// Package backup owns backups: taking one (Run: it selects resources,
// lists them concurrently with pagination at their preferred versions,
// streams them into an archive in the backup storage location, and
// commits the backup by writing ferry-backup.json last), and loading a
// stored one, ferry's or Velero's, verified against its digests (Load,
// LoadVelero) for a restore, a verification or a describe.
package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	labelselection "k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/filter"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

// Options configure one backup.
type Options struct {
	Name string
	Spec v1alpha1.BackupSpec
	// PageSize is the LIST page size (items); default 500.
	PageSize int64
	// Workers is the number of concurrent LIST streams; default 8.
	Workers int
	// OnProgress, if set, is called as items are listed and written.
	OnProgress func(backedUp, total int)
	// OnStage, if set, is called as the backup moves past its items to
	// the images (StageImages) and to the pod volume data (StageVolumes).
	OnStage func(stage string)
	// PodVolumes, if set, backs up the data of pod volumes too.
	PodVolumes *PodVolumeOptions
	Log        *slog.Logger
	// Images configures registry access for the image step (Spec.Images);
	// its Mode and Mappings are taken from Spec.
	Images images.Options
	// UID, written as the stored Backup's metadata.uid, tells this
	// backup's folder from another of the same name (the server passes
	// its Backup object's UID; default a new random UID).
	UID types.UID
	// Deadline bounds the whole backup, items, images and volume data; a
	// backup that reaches it is left Incomplete, as an interrupted one.
	Deadline deadline.Deadline
}

// ErrExists is returned when a backup of that name is already in the location.
var ErrExists = errors.New("backup already exists")

// ValidateName checks that name can be a store folder and an object name
// (store.ValidateBackupName).
func ValidateName(name string) error { return store.ValidateBackupName(name) }

// Run takes a backup of cluster into loc. It returns the committed Backup
// and its per-item results. The error is non-nil only when the backup could
// not start (bad options, name taken, store unwritable); a backup that ran
// reports PartiallyFailed or Failed in its status.
// Within opts.Deadline: an error of a backup cut short by it names it.
func Run(ctx context.Context, cluster *kube.Cluster, loc *store.Location, opts Options) (*v1alpha1.Backup, *report.Results, error) {
	ctx, cancel := opts.Deadline.Context(ctx, "backup")
	defer cancel()
	b, results, err := backUp(ctx, cluster, loc, opts)
	return b, results, deadline.Cause(ctx, err)
}

// backUp is Run within the deadline.
func backUp(ctx context.Context, cluster *kube.Cluster, loc *store.Location, opts Options) (*v1alpha1.Backup, *report.Results, error) {
	mappings, nsf, selector, err := opts.prepare()
	if err != nil {
		return nil, nil, err
	}
	if _, err := loc.GetBackup(ctx, opts.Name); err == nil || errors.Is(err, store.ErrIncomplete) {
		if err != nil {
			return nil, nil, fmt.Errorf("backup %q: %w (an interrupted earlier run; remove it with `ferry backup delete %s`)", opts.Name, ErrExists, opts.Name)
		}
		return nil, nil, fmt.Errorf("backup %q: %w in %s", opts.Name, ErrExists, loc.URL())
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, nil, err
	}

	b := v1alpha1.NewBackup(opts.Name)
	b.UID = opts.UID
	if b.UID == "" {
		b.UID = uuid.NewUUID()
	}
	b.Spec = opts.Spec
	b.Spec.StorageLocation = loc.URL()
	now := metav1.Now()
	b.CreationTimestamp = now
	b.Status.StartTimestamp = &now
	b.Status.Phase = v1alpha1.PhaseInProgress
	b.Status.SourceCluster = &v1alpha1.ClusterInfo{Server: cluster.Config.Host, GitVersion: cluster.Version.GitVersion}
	if err := loc.PutJSON(ctx, store.BackupDir(opts.Name)+store.BackupStartedMarker, b); err != nil {
		return nil, nil, err
	}

	results := &report.Results{}
	r := &run{ctx: ctx, cluster: cluster, opts: opts, nsf: nsf, selector: selector.String(), results: results, counts: map[string]int{}}
	if opts.Spec.Images != images.ModeNone {
		r.images = images.NewCollector()
	}
	if opts.PodVolumes != nil {
		r.pods = &podCollector{}
	}
	err = r.execute(loc, b)
	if err == nil && r.images != nil && ctx.Err() == nil {
		opts.stage(StageImages)
		err = r.backupImages(loc, b, mappings)
	}
	if err == nil && opts.PodVolumes != nil && ctx.Err() == nil {
		opts.stage(StageVolumes)
		err = r.backupVolumes(loc, b)
	}
	return r.commit(loc, b, err)
}

// The stages of a backup after its items, as OnStage names them.
const (
	StageImages  = "Images"
	StageVolumes = "Volumes"
)

func (o *Options) stage(s string) {
	if o.OnStage != nil {
		o.OnStage(s)
	}
}

// prepare fills in the defaults of o and checks it before anything is read
// or written. It returns the parsed image mappings, namespace filter and
// label selector (which leaves out ferry's own helper pods).
func (o *Options) prepare() ([]images.Mapping, *filter.Namespaces, labels.Selector, error) {
	if err := ValidateName(o.Name); err != nil {
		return nil, nil, nil, err
	}
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Spec.Images == "" {
		o.Spec.Images = images.ModeRecord
	}
	if o.Spec.IncludeClusterResources == "" {
		o.Spec.IncludeClusterResources = "auto"
	}
	if err := o.validateSpec(); err != nil {
		return nil, nil, nil, err
	}
	mappings, err := images.ParseMappings(o.Spec.ImageRegistryMappings)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", field.Invalid(field.NewPath("spec", "imageRegistryMappings"), o.Spec.ImageRegistryMappings, ""), err)
	}
	if o.Spec.Images == images.ModeCopy && len(mappings) == 0 {
		return nil, nil, nil, field.Required(field.NewPath("spec", "imageRegistryMappings"), `spec.images "copy" needs the target registries (OLD=NEW)`)
	}
	nsf, err := filter.NewNamespaces(o.Spec.IncludedNamespaces, o.Spec.ExcludedNamespaces)
	if err != nil {
		return nil, nil, nil, err
	}
	selector, err := labels.Parse(o.Spec.LabelSelector)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", field.Invalid(field.NewPath("spec", "labelSelector"), o.Spec.LabelSelector, ""), err)
	}
	// ferry's own helper pods, their Secrets and Leases (of this run, or
	// of a run that was killed) are never part of a backup.
	notHelper, err := labels.NewRequirement(v1alpha1.LabelHelperRun, labelselection.DoesNotExist, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	return mappings, nsf, selector.Add(*notHelper), nil
}

// Validate checks o's name and spec as Run does, without any I/O, so that
// a caller can refuse a bad spec before it connects to anything.
func (o Options) Validate() error {
	_, _, _, err := o.prepare()
	return err
}

// validateSpec checks the enumerated fields of o.Spec, and the deadline.
func (o *Options) validateSpec() error {
	spec := field.NewPath("spec")
	modes := []string{images.ModeNone, images.ModeRecord, images.ModeCopy, images.ModeBundle}
	if !slices.Contains(modes, o.Spec.Images) {
		return field.NotSupported(spec.Child("images"), o.Spec.Images, modes)
	}
	if v := o.Spec.IncludeClusterResources; !slices.Contains([]string{"auto", "true", "false"}, v) {
		return field.NotSupported(spec.Child("includeClusterResources"), v, []string{"auto", "true", "false"})
	}
	return o.Deadline.Validate()
}

// commitTimeout bounds the commit's writes, which ctx no longer cuts.
const commitTimeout = 2 * time.Minute

// commit records how the run went (err is what made it fail, if anything)
// and commits the backup by writing ferry-backup.json last.
func (r *run) commit(loc *store.Location, b *v1alpha1.Backup, err error) (*v1alpha1.Backup, *report.Results, error) {
	ctx, opts, results := r.ctx, r.opts, r.results
	end := metav1.Now()
	b.Status.CompletionTimestamp = &end
	b.Status.Progress = v1alpha1.BackupProgress{TotalItems: int(r.total.Load()), ItemsBackedUp: int(r.written.Load())}
	b.Status.ResourceCounts = r.counts
	if n := int(r.hooksAttempted.Load()); n > 0 {
		b.Status.HookStatus = &v1alpha1.HookStatus{HooksAttempted: n, HooksFailed: int(r.hooksFailed.Load())}
	}
	b.Status.Warnings = len(results.Warnings)
	b.Status.Errors = len(results.Errors) + results.Count(report.Failed)
	switch {
	case err != nil:
		b.Status.Phase = v1alpha1.PhaseFailed
		b.Status.FailureReason = err.Error()
		results.Errorf("%v", err)
		b.Status.Errors++
	case b.Status.Errors > 0:
		b.Status.Phase = v1alpha1.PhasePartiallyFailed
	default:
		b.Status.Phase = v1alpha1.PhaseCompleted
	}
	if ctx.Err() != nil {
		// Interrupted: leave it Incomplete (no commit), as a crash would.
		return b, results, fmt.Errorf("backup %s interrupted (%w): it is Incomplete; remove it with `ferry backup delete %s`", opts.Name, deadline.Cause(ctx, ctx.Err()), opts.Name)
	}
	// From here on the commit is not cut short by ctx: a marker write
	// that the store took as ctx ended would leave a committed backup
	// reported as failed. Its own timeout bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := stillStarted(ctx, loc, b); err != nil {
		// Its folder was deleted (ferry backup delete of what looked like
		// an interrupted backup) or taken over: committing now would make
		// a backup with missing parts look complete.
		b.Status.Phase, b.Status.FailureReason = v1alpha1.PhaseFailed, err.Error()
		return b, results, err
	}
	if err := loc.PutSealedJSON(ctx, store.BackupResultsKey(opts.Name), results); err != nil {
		return b, results, err
	}
	// Counted up to the commit; the commit's own retries cannot be in it.
	b.Status.Retries = &v1alpha1.RetryCounts{ObjectStore: store.Retries(), APIServer: kube.Retries(), Registry: images.Retries()}
	// The commit: only now is the backup visible as restorable.
	if err := loc.PutJSON(ctx, store.BackupDir(opts.Name)+store.BackupMarker, b); err != nil {
		return b, results, err
	}
	opts.Log.Info("backup committed", "backup", opts.Name, "phase", b.Status.Phase, "items", b.Status.Progress.ItemsBackedUp, "took", end.Sub(b.Status.StartTimestamp.Time).Round(time.Millisecond))
	return b, results, nil
}

// stillStarted checks, just before the commit, that b's started marker is
// still in loc and is b's: a backup whose folder was deleted while it ran
// is not committed.
func stillStarted(ctx context.Context, loc *store.Location, b *v1alpha1.Backup) error {
	started := &v1alpha1.Backup{}
	err := loc.GetJSON(ctx, store.BackupDir(b.Name)+store.BackupStartedMarker, started)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("backup %s: its folder in %s was deleted while it ran (ferry backup delete?); it is not committed, and what it wrote since is no restorable backup: remove it with `ferry backup delete %s`", b.Name, loc.URL(), b.Name)
	case err != nil:
		return err
	case started.UID != b.UID || !sameSecond(started.Status.StartTimestamp, b.Status.StartTimestamp):
		return fmt.Errorf("backup %s: another backup of that name started in %s while it ran; it is not committed", b.Name, loc.URL())
	}
	return nil
}

// sameSecond reports whether two start times are one, at the second the
// started marker's JSON keeps.
func sameSecond(a, b *metav1.Time) bool {
	return a != nil && b != nil && a.Unix() == b.Unix()
}

// run holds the state of one backup while it lists and writes.
type run struct {
	ctx      context.Context
	cluster  *kube.Cluster
	opts     Options
	nsf      *filter.Namespaces
	selector string
	results  *report.Results
	aw       *archive.Writer

	total, written atomic.Int64
	// hooksAttempted and hooksFailed count the backup hooks run.
	hooksAttempted, hooksFailed atomic.Int32
	mu                          sync.Mutex
	counts                      map[string]int
	refs                        *references // nil unless related objects are followed
	images                      *images.Collector
	pods                        *podCollector // nil unless pod volumes are backed up
}

func (r *run) progress() {
	if r.opts.OnProgress != nil {
		r.opts.OnProgress(int(r.written.Load()), int(r.total.Load()))
	}
}

// execute streams the archive to the store. Any error returned makes the
// backup Failed; per-resource list errors go into results instead.
func (r *run) execute(loc *store.Location, b *v1alpha1.Backup) error {
	apis, err := kube.Discover(r.cluster.Discovery)
	if err != nil {
		return err
	}
	for gv, e := range apis.Failed {
		r.results.Errorf("discovery of %s failed, its resources are not in the backup: %v", gv, e)
	}
	for _, inc := range unmatchedIncludes(apis, r.opts.Spec.IncludedResources) {
		r.results.Warnf("spec.includedResources: %q matches no resource the cluster serves", inc)
	}
	if literal, ok := r.nsf.Literal(); ok {
		for _, ns := range literal {
			if _, err := r.cluster.Typed.CoreV1().Namespaces().Get(r.ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				r.results.Warnf("spec.includedNamespaces: %q: no such namespace in the cluster", ns)
			}
		}
	}
	res := filter.NewResources(r.opts.Spec.IncludedResources, r.opts.Spec.ExcludedResources)
	sel := selectResources(apis, res, r.nsf, r.opts.Spec.IncludeClusterResources, r.opts.Spec.PreferredVersionOnly)

	key := store.ArchiveKey(r.opts.Name)
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	w, err := loc.NewSealedWriter(ctx, key)
	if err != nil {
		return err
	}
	aw, err := archive.NewWriter(w)
	if err != nil {
		w.Abort()
		return err
	}
	r.aw = aw
	follow := !sel.clusterAll && !sel.clusterNone
	if follow {
		r.refs = newReferences()
	}

	if err := r.listAll(ctx, r.namespacedTasks(sel)); err != nil {
		w.Abort()
		return err
	}
	if err := r.listAll(ctx, r.clusterTasks(sel)); err != nil {
		w.Abort()
		return err
	}
	if follow {
		if err := r.writeRelated(ctx, apis, res); err != nil {
			w.Abort()
			return err
		}
	}

	spec, _ := json.Marshal(r.opts.Spec)
	sum, err := aw.Close(archive.Manifest{BackupName: r.opts.Name, Spec: spec, SourceVersion: r.cluster.Version.GitVersion, PreferredVersions: apis.Preferred})
	if err != nil {
		w.Abort()
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("uploading %s: %w", key, err)
	}
	b.Status.Archive = &v1alpha1.ArchiveSummary{Key: key, Size: sum.Size, SHA256: sum.SHA256, ManifestSHA256: sum.ManifestSHA256, Entries: sum.Entries}
	if loc.Encrypted() {
		b.Status.Archive.Encryption = "age"
	}
	return nil
}

// writeItem writes one object (JSON, with apiVersion and kind) into the
// archive. Per-item records live in the archive's manifest; the results
// file holds only failures, warnings and the related objects' reasons.
func (r *run) writeItem(res kube.Resource, namespace, name string, data []byte) error {
	e := archive.Entry{Group: res.Group, Version: res.Version, Resource: res.GroupVersionResource.Resource, Kind: res.Kind, Namespace: namespace, Name: name}
	if err := r.aw.WriteItem(e, data); err != nil {
		return err
	}
	r.pods.observe(res, data)
	r.written.Add(1)
	r.mu.Lock()
	r.counts[res.GroupResource()]++
	r.mu.Unlock()
	r.progress()
	return nil
}

// writeOtherVersion writes a copy of an object at a version other than its
// preferred one, at resources/<gr>/<version>/... (docs/design.md#the-archive-format). It is
// not counted as a backed-up object.
func (r *run) writeOtherVersion(res kube.Resource, namespace, name string, data []byte) error {
	e := archive.Entry{Group: res.Group, Version: res.Version, Resource: res.GroupVersionResource.Resource, Kind: res.Kind, Namespace: namespace, Name: name}
	return r.aw.WriteItemAt(e, res.Version, data)
}

// writeObject writes an object read with the dynamic client.
func (r *run) writeObject(res kube.Resource, obj *unstructured.Unstructured) error {
	data, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding %s %s/%s: %w", res.GroupResource(), obj.GetNamespace(), obj.GetName(), err)
	}
	return r.writeItem(res, obj.GetNamespace(), obj.GetName(), data)
}

// backupImages runs the image step (pkg/images) on the images the
// workloads named, and pins its files in b. A failed image is a warning,
// or with ImagesRequired the backup's failure.
func (r *run) backupImages(loc *store.Location, b *v1alpha1.Backup, mappings []images.Mapping) error {
	rec := r.images.Record(r.opts.Spec.Images)
	sum, err := images.Backup(r.ctx, loc, r.opts.Name, rec, images.BackupOptions{Mode: r.opts.Spec.Images, Mappings: mappings, Copy: r.opts.Images})
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	b.Status.Images = sum
	failed := append([]string(nil), rec.Malformed...)
	for _, ir := range rec.Images {
		if ir.Error != "" {
			failed = append(failed, ir.Error)
		}
	}
	for _, f := range failed {
		if r.opts.Spec.ImagesRequired {
			r.results.Errorf("%s", f)
		} else {
			r.results.Warnf("%s", f)
		}
	}
	if len(failed) > 0 && r.opts.Spec.ImagesRequired {
		return fmt.Errorf("%d of %d images failed (spec.imagesRequired); the first: %s", len(failed), len(rec.Images)+len(rec.Malformed), failed[0])
	}
	r.opts.Log.Info("images", "mode", sum.Mode, "images", sum.Images, "failed", sum.Failed, "blobsWritten", sum.BlobsWritten, "blobsReused", sum.BlobsReused)
	return nil
}
