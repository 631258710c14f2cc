package migration

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// ErrNoNamespaces is returned for a staged migration whose backup spec
// does not name its namespaces: a cutover quiesces the workloads of
// spec.includedNamespaces, and never a whole cluster's.
var ErrNoNamespaces = errors.New("a staged migration needs spec.includedNamespaces: its cutover scales the workloads of those namespaces to zero, and never a whole cluster's")

// ValidateStagedName refuses a name that cannot be a staged migration's:
// its stages and cutovers are backups and restores named NAME-stage-N and
// NAME-cutover-N (N up to 999), so NAME takes lowercase letters, digits,
// '-' and '.', begins and ends with a letter or digit, and leaves room for
// the longest suffix.
func ValidateStagedName(name string) error {
	const suffix = "-cutover-999"
	if name == "" {
		return errors.New("a staged migration needs a name")
	}
	if err := ValidateName(name); err != nil {
		return fmt.Errorf("migration name %q: lowercase letters, digits, '-' and '.', beginning and ending with a letter or digit", name)
	}
	if err := ValidateName(name + suffix); err != nil {
		max := len(name)
		for max > 0 && ValidateName(name[:max]+suffix) != nil {
			max--
		}
		return fmt.Errorf("migration name %q: %d characters, at most %d (its cutovers are named NAME%s)", name, len(name), max, suffix)
	}
	return nil
}

// CheckStagedSpecs refuses, before anything is read, specs that no stage
// of a staged migration takes (see stageSpec); the namespaces may be left
// out, as a later stage takes the journal's.
func CheckStagedSpecs(b v1alpha1.BackupSpec, r v1alpha1.RestoreSpec) error {
	if len(b.IncludedNamespaces) == 0 {
		b.IncludedNamespaces = []string{"later-stage"}
	}
	_, err := stageSpec(b, r)
	return err
}

// stageSpec checks and completes the specs of a staged migration's first
// stage: it moves claims' data, so every claim of the selection is
// backed up (spec.defaultVolumesToFsBackup), and it names its namespaces.
func stageSpec(b v1alpha1.BackupSpec, r v1alpha1.RestoreSpec) (v1alpha1.BackupSpec, error) {
	if len(b.IncludedNamespaces) == 0 {
		return b, ErrNoNamespaces
	}
	for _, ns := range b.IncludedNamespaces {
		if strings.ContainsAny(ns, "*?[") {
			return b, fmt.Errorf("spec.includedNamespaces %q: a staged migration names its namespaces, without patterns: its cutover scales the workloads of exactly those to zero", ns)
		}
	}
	// The quiesce scales every workload of the namespaces: a narrower
	// selection would stop what it does not move.
	switch {
	case b.LabelSelector != "":
		return b, errors.New("spec.labelSelector: a staged migration moves whole namespaces (its cutover quiesces every workload in them)")
	case len(b.IncludedResources) > 0 || len(b.ExcludedResources) > 0:
		return b, errors.New("spec.includedResources, spec.excludedResources: a staged migration moves whole namespaces (its cutover quiesces every workload in them)")
	case r.DryRun:
		return b, errors.New("spec.dryRun: a staged migration writes the target's claims; plan it with a dry-run migrate instead")
	case len(b.ExcludedNamespaces) > 0:
		return b, errors.New("spec.excludedNamespaces: a staged migration names the namespaces it moves (spec.includedNamespaces), and its cutover quiesces all of them")
	case r.VerifyRuntime != nil && r.VerifyRuntime.Skip:
		return b, errors.New("spec.verifyRuntime.skip: a cutover's downtime ends when its verification sees the target's workloads run")
	}
	b.DefaultVolumesToFsBackup = true
	return b, nil
}

// Stage runs one stage of staged migration o.Name while the source runs:
// an incremental snapshot of every claim of the selection, written into
// the target's claims (created by the first stage, with the storage-class
// mapping; later stages write only what changed and remove what the
// source removed). No workload is created in the target. The first stage
// starts the journal with o's specs; later ones use the journal's. A
// stage killed midway runs again under its number.
func Stage(ctx context.Context, o Options) (*Journal, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := CheckClusters(ctx, o.Source, o.Target); err != nil {
		return nil, err
	}
	j, err := stageJournal(ctx, &o)
	if err != nil {
		return j, err
	}
	if err := j.sameClusters(ctx, o.Source, o.Target); err != nil {
		return j, err
	}
	return j, runStage(ctx, &o, j)
}

// stageJournal is the journal the next stage of o.Name runs with: a new
// one with o's specs, or the one in the location. Until a stage finishes,
// o's specs replace the journal's (a first stage that failed on a wrong
// mapping is corrected by running it again with the right one); after,
// other specs are refused.
func stageJournal(ctx context.Context, o *Options) (*Journal, error) {
	j, err := LoadJournal(ctx, o.Location, o.Name)
	switch {
	case errors.Is(err, ErrNoJournal):
		spec, err := stageSpec(o.Backup.Spec, o.Restore.Spec)
		if err != nil {
			return nil, err
		}
		return &Journal{Name: o.Name, Backup: spec, Restore: o.Restore.Spec}, nil
	case err != nil:
		return nil, err
	case j.Finished != nil:
		return j, j.finished()
	case j.Cutover != nil:
		return j, fmt.Errorf("migration %s: its cutover began at %s (step %s); no stage runs after it (ferry migrate rollback %s undoes it)", o.Name, j.Cutover.Started.Format(time.RFC3339), j.Cutover.Step, o.Name)
	case sameSpecs(j, o) == nil:
		return j, nil
	case j.lastStage() != nil:
		return j, sameSpecs(j, o)
	}
	spec, err := stageSpec(o.Backup.Spec, o.Restore.Spec)
	if err != nil {
		return j, err
	}
	o.Log.Warn("no stage of this migration finished: the specs given replace its first stage's", "migration", o.Name, "stages", len(j.Stages))
	j.Backup, j.Restore = spec, o.Restore.Spec
	j.SourceID, j.TargetID = "", "" // the clusters too may have been the wrong ones
	return j, nil
}

// runStage runs the next stage of j and records it.
func runStage(ctx context.Context, o *Options, j *Journal) error {
	n := len(j.Stages) + 1
	if n > 1 && j.Stages[n-2].Ended.IsZero() {
		// A stage killed midway: its backup and restore are removed, and
		// it runs again (claims it half wrote are synced again).
		n--
		j.Stages = j.Stages[:n-1]
	}
	name := fmt.Sprintf("%s-stage-%d", o.Name, n)
	for _, del := range []func(context.Context, string) error{o.Location.DeleteRestore, o.Location.DeleteBackup} {
		if err := del(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("stage %s: removing what a killed run of it left: %w", name, err)
		}
	}
	j.Stages = append(j.Stages, StageRecord{Number: n, Name: name, Started: time.Now()})
	if err := j.save(ctx, o.Location); err != nil {
		return err
	}
	s := &j.Stages[len(j.Stages)-1]
	err := stage(ctx, o, j, s)
	if err != nil {
		s.Error = err.Error()
	}
	s.Ended = time.Now()
	if serr := j.save(ctx, o.Location); serr != nil && err == nil {
		err = serr
	}
	return err
}

// stage backs up the source under s.Name and restores its claims into the
// target.
func stage(ctx context.Context, o *Options, j *Journal, s *StageRecord) error {
	o.step(StepBackup)
	bopts := o.Backup
	bopts.Name, bopts.Spec = s.Name, j.Backup
	if bopts.PodVolumes != nil {
		pv := *bopts.PodVolumes
		pv.UnmountedClaims = true
		bopts.PodVolumes = &pv
	}
	b, _, err := backup.Run(ctx, o.Source, o.Location, bopts)
	if err != nil {
		return fmt.Errorf("stage %s: backup: %w", s.Name, err)
	}
	if o.OnBackup != nil {
		o.OnBackup(b, nil, false)
	}
	if b.Status.Phase == v1alpha1.PhaseFailed {
		return fmt.Errorf("stage %s: backup failed: %s", s.Name, b.Status.FailureReason)
	}
	o.step(StepRestore)
	ropts := o.Restore
	ropts.Name, ropts.Spec = s.Name, j.Restore
	ropts.Spec.BackupName = s.Name
	ropts.Spec.IncludedResources = []string{"persistentvolumeclaims"}
	ropts.Spec.ExistingVolumeDataPolicy = v1alpha1.VolumeDataWrite
	ropts.Spec.QuiescedWorkloads = nil
	r, _, err := restore.Run(ctx, o.Target, o.Location, ropts)
	if err != nil {
		return fmt.Errorf("stage %s: restore: %w", s.Name, err)
	}
	if o.OnRestore != nil {
		o.OnRestore(r, nil)
	}
	s.Claims = claimStages(ctx, o.Location, s.Name)
	s.Rates = measure(ctx, o, j, b)
	for _, c := range s.Claims {
		if c.Error != "" {
			return fmt.Errorf("stage %s: claim %s: %s", s.Name, c.Claim, c.Error)
		}
	}
	if r.Status.Phase != v1alpha1.PhaseCompleted {
		return fmt.Errorf("stage %s: restore %s: %s", s.Name, r.Status.Phase, r.Status.FailureReason)
	}
	return nil
}

// claimStages joins stage name's snapshot and write records, per claim.
func claimStages(ctx context.Context, loc *store.Location, name string) []ClaimStage {
	var rec volumes.BackupRecord
	var writes []volumes.PodVolumeRestore
	if err := loc.GetJSON(ctx, store.BackupVolumesKey(name), &rec); err != nil {
		return []ClaimStage{{Claim: "(all)", Error: "the stage's snapshot record: " + err.Error()}}
	}
	werr := loc.GetJSON(ctx, store.RestoreVolumesKey(name), &writes)
	byID := map[string]volumes.PodVolumeRestore{}
	for _, w := range writes {
		byID[w.Identity] = w
	}
	var out []ClaimStage
	for _, v := range rec.Volumes {
		if v.ClaimName == "" {
			continue
		}
		c := ClaimStage{Claim: v.Namespace + "/" + v.ClaimName, Error: v.Error}
		if r := v.SnapshotResult; r != nil {
			c.SnapshotID, c.ScannedBytes, c.UploadedBytes = r.SnapshotID, r.Bytes, r.UploadedBytes
			c.Vanished, c.VanishedPaths, c.Changed, c.Snapshot = r.Vanished, r.VanishedPaths, r.Changed, time.Duration(r.Duration)
		}
		w, ok := byID[v.Identity]
		switch {
		case c.Error != "":
		case !ok && werr != nil:
			c.Error = fmt.Sprintf("whether its snapshot was written into the target's claim is not known: reading %s: %v", store.RestoreVolumesKey(name), werr)
		case !ok:
			c.Error = "restore " + name + " did not write its snapshot into the target's claim (its volume record has no entry for it)"
		case w.Error != "":
			c.Error = w.Error
		case w.RestoreResult != nil:
			c.Target = w.Namespace + "/" + w.ClaimName
			c.Write = time.Duration(w.Duration)
			c.ChangedBytes, c.ChangedFiles = w.Bytes, w.Files
			if d := w.Delta; d != nil {
				c.Removed = d.Removed
			}
		}
		out = append(out, c)
	}
	return out
}

// measure takes the rates the cutover's prediction needs: the target's
// create rate, the source pods' start and stop times, and the object
// count of backup b.
func measure(ctx context.Context, o *Options, j *Journal, b *v1alpha1.Backup) MeasuredRates {
	m := MeasuredRates{Objects: b.Status.Progress.TotalItems}
	ns := mapNamespace(j.Restore, j.Backup.IncludedNamespaces[0])
	m.CreatesPerSecond = createRate(ctx, o.Target, ns, o.Restore.Workers)
	for _, src := range j.Backup.IncludedNamespaces {
		pods, err := o.Source.Typed.CoreV1().Pods(src).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			if d := startTime(p); d > m.Start {
				m.Start = d
			}
			if d := stopTime(p); d > m.Quiesce {
				m.Quiesce = d
			}
		}
	}
	return m
}

// createRate measures the target API server's create rate in namespace
// ns: server-side dry-run creates (admission and validation, no write) at
// the restore's concurrency; 0 when they fail.
func createRate(ctx context.Context, c *kube.Cluster, ns string, workers int) float64 {
	const n = 64
	if workers <= 0 {
		workers = 32
	}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	sem := make(chan struct{}, workers)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ferry-rate-probe-%d", i)}, Data: map[string]string{"probe": "x"}}
			if _, err := c.Typed.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok == 0 {
		return 0
	}
	return float64(ok) / time.Since(start).Seconds()
}

// maxStart bounds a pod's measured start: a Ready condition that flipped
// long after the pod started (a readiness blip) says nothing of a start.
const maxStart = 10 * time.Minute

// startTime is how long running pod p took from its creation to Ready:
// the Ready condition's transition, for a pod whose containers never
// restarted (a later transition is a restart's, not the start's).
func startTime(p corev1.Pod) time.Duration {
	if p.Status.Phase != corev1.PodRunning || p.Labels["app.kubernetes.io/managed-by"] == "ferry" {
		return 0
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount > 0 {
			return 0
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			if d := c.LastTransitionTime.Sub(p.CreationTimestamp.Time); d > 0 && d <= maxStart {
				return d
			}
		}
	}
	return 0
}

// stopTime is the termination grace pod p asks for when a container has a
// preStop hook (which may use all of it); 0 otherwise.
func stopTime(p corev1.Pod) time.Duration {
	for _, c := range p.Spec.Containers {
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			g := int64(corev1.DefaultTerminationGracePeriodSeconds)
			if p.Spec.TerminationGracePeriodSeconds != nil {
				g = *p.Spec.TerminationGracePeriodSeconds
			}
			return time.Duration(g) * time.Second
		}
	}
	return 0
}

// sortedSet is s sorted, without repeats: namespaces given in another
// order are the same selection.
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// sameSpecs refuses a later stage or a cutover given a selection or a
// mapping other than the first stage's (which the journal keeps and
// they use): ignoring it would move something else than asked for. An
// empty field is not given.
func sameSpecs(j *Journal, o *Options) error {
	type field struct {
		name      string
		got, want any
		given     bool
	}
	b, r := o.Backup.Spec, o.Restore.Spec
	for _, f := range []field{
		{"spec.includedNamespaces", sortedSet(b.IncludedNamespaces), sortedSet(j.Backup.IncludedNamespaces), len(b.IncludedNamespaces) > 0},
		{"spec.excludedNamespaces", sortedSet(b.ExcludedNamespaces), sortedSet(j.Backup.ExcludedNamespaces), len(b.ExcludedNamespaces) > 0},
		{"spec.labelSelector", b.LabelSelector, j.Backup.LabelSelector, b.LabelSelector != ""},
		{"spec.namespaceMapping", r.NamespaceMapping, j.Restore.NamespaceMapping, len(r.NamespaceMapping) > 0},
		{"spec.storageClassMapping", r.StorageClassMapping, j.Restore.StorageClassMapping, len(r.StorageClassMapping) > 0},
		{"spec.dryRun", r.DryRun, j.Restore.DryRun, r.DryRun},
	} {
		if f.given && !reflect.DeepEqual(f.got, f.want) {
			return fmt.Errorf("migration %s: %s %v differs from its first stage's (%v): a staged migration keeps its first stage's selection and mappings", j.Name, f.name, f.got, f.want)
		}
	}
	return nil
}
