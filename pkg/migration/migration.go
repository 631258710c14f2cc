// Package migration is a migration: one backup of a source cluster,
// restored into a target cluster through a backup storage location, then
// verified against the backup, with the verification report kept in the
// location beside the restore. It is the one migration sequence: `ferry
// migrate` and the hub's Migration controller both run it
// (docs/design.md#one-engine-three-front-ends).
package migration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
)

// Step is where a migration is.
type Step string

// The steps of a migration, in order. Images and Volumes are the backup's
// stages after its items.
const (
	StepBackup  Step = "Backup"
	StepImages  Step = "Images"
	StepVolumes Step = "Volumes"
	StepRestore Step = "Restore"
	StepVerify  Step = "Verify"
)

// Options are one migration's: the two clusters, the location, and the
// backup's and restore's own options. Backup.Name and Restore.Name are
// set to Name; Restore.Spec.BackupName too.
type Options struct {
	Name           string
	Source, Target *kube.Cluster
	Location       *store.Location
	Backup         backup.Options
	Restore        restore.Options
	// Verify compares the target with the backup after the restore and
	// keeps the report in the location (ReportKeys).
	Verify bool
	// Resume lets a migration of a name that has run before resume
	// (Prepare); without it, a backup of that name is refused, as the
	// hub wants for two Migrations of one name in two namespaces.
	Resume bool
	// OnStep, if set, is called as each step starts.
	OnStep func(Step)
	// OnBackup, if set, is called once the backup ended, with its
	// per-item results, before the restore starts; or, for a resumed
	// migration, with the reused backup (reused true, res nil).
	OnBackup func(b *v1alpha1.Backup, res *report.Results, reused bool)
	// OnRestore, if set, is called once the restore ended, with its
	// per-item results, before the verification starts. Result keeps
	// them only for a dry run: a large migration's peak memory is lower
	// when the verification, which collects its own, does not run beside
	// them.
	OnRestore func(r *v1alpha1.Restore, res *report.Results)
	// OnVerifyProgress, if set, is called as the verification compares
	// objects.
	OnVerifyProgress func(done, total int)
	// Estimate is a pre-flight's time estimate of this migration
	// (preflight.Run); the report shows it against the actual times.
	Estimate *report.Estimate
	Log      *slog.Logger
}

// Result is what a migration did. Backup is nil when the backup did not
// run; Restore when the restore did not; Verification when the
// verification did not.
type Result struct {
	Backup       *v1alpha1.Backup
	Restore      *v1alpha1.Restore
	Verification *report.Verification
	// Resumed says the backup is an earlier run's, reused (Prepare).
	Resumed bool
	// RestoreResults are a dry run's per-item results (see
	// Options.OnRestore for the others').
	RestoreResults *report.Results
}

// Outcome is how a migration ended: Completed when the backup and the
// restore completed and the verification (if any) found no unexpected
// difference; Failed when the backup or the restore failed; otherwise
// PartiallyFailed. reason is a CamelCase word, message says why.
func (r *Result) Outcome() (phase v1alpha1.Phase, reason, message string) {
	switch {
	case r.Backup == nil || r.Backup.Status.Phase == v1alpha1.PhaseFailed:
		msg := "the backup did not run"
		if r.Backup != nil {
			msg = "backup " + r.Backup.Name + " failed: " + r.Backup.Status.FailureReason
		}
		return v1alpha1.PhaseFailed, "BackupFailed", msg
	case r.Restore == nil || r.Restore.Status.Phase == v1alpha1.PhaseFailed:
		msg := "the restore did not run"
		if r.Restore != nil {
			msg = "restore " + r.Restore.Name + " failed: " + r.Restore.Status.FailureReason
		}
		return v1alpha1.PhaseFailed, "RestoreFailed", msg
	case r.Backup.Status.Phase != v1alpha1.PhaseCompleted:
		return v1alpha1.PhasePartiallyFailed, "BackupPartiallyFailed", fmt.Sprintf("backup %s: %d of %d items backed up", r.Backup.Name, r.Backup.Status.Progress.ItemsBackedUp, r.Backup.Status.Progress.TotalItems)
	case r.Restore.Status.Phase != v1alpha1.PhaseCompleted:
		return v1alpha1.PhasePartiallyFailed, "RestorePartiallyFailed", fmt.Sprintf("restore %s: %d failed", r.Restore.Name, r.Restore.Status.Counts.Failed)
	case r.Verification != nil && r.Verification.Summary.Unexpected > 0:
		return v1alpha1.PhasePartiallyFailed, "VerificationFoundDifferences", fmt.Sprintf("the verification found %d unexpected difference(s) between the backup and the target", r.Verification.Summary.Unexpected)
	case r.Verification != nil && r.Verification.Running != nil && r.Verification.Running.Counts.Failed > 0:
		return v1alpha1.PhasePartiallyFailed, "RuntimeChecksFailed", fmt.Sprintf("the target's objects match, but not everything runs: %s; first: %s", r.Verification.Running.Headline(), firstFailure(r.Verification.Running))
	case r.Verification != nil && len(r.Verification.Errors) > 0:
		return v1alpha1.PhasePartiallyFailed, "VerificationErrors", fmt.Sprintf("the verification had %d error(s): %s", len(r.Verification.Errors), r.Verification.Errors[0])
	}
	msg := "the target matches the backup"
	switch {
	case r.Restore.Spec.DryRun:
		msg = "the dry run found nothing that fails; nothing was written to the target"
	case r.Verification == nil:
		msg = "the restore completed; the target was not verified"
	}
	if im := r.Backup.Status.Images; im != nil && im.Failed > 0 {
		msg += fmt.Sprintf("; %d of %d image(s) could not be resolved in mode %s, and their references were left as they were (see the report's images)", im.Failed, im.Images, im.Mode)
	}
	return v1alpha1.PhaseCompleted, "Completed", msg
}

// ReportKeys are the keys, in the location, of migration name's
// verification report: JSON and HTML, in the restore's folder (deleted with
// it).
func ReportKeys(name string) (jsonKey, htmlKey string) {
	return store.RestoreDir(name) + "report.json", store.RestoreDir(name) + "report.html"
}

// ValidateName refuses a name that cannot be a migration's: its backup's
// and its restore's.
func ValidateName(name string) error {
	if err := backup.ValidateName(name); err != nil {
		return err
	}
	return store.ValidateRestoreName(name)
}

// ErrVerification is returned (wrapped) by Run when the verification
// could not run (or its report could not be kept); the Result holds the
// backup and the restore, which ran.
var ErrVerification = errors.New("verification")

// ErrSameCluster is returned (wrapped) by Run when the source and the
// target are one cluster.
var ErrSameCluster = errors.New("the source and the target are the same cluster; a migration moves between two clusters")

// CheckClusters refuses a source and a target that are one cluster: the
// same API server, or (two addresses of one cluster) the same kube-system
// namespace UID.
func CheckClusters(ctx context.Context, src, dst *kube.Cluster) error {
	same := src.Config.Host == dst.Config.Host
	if !same {
		srcID, err1 := src.ID(ctx)
		dstID, err2 := dst.ID(ctx)
		same = err1 == nil && err2 == nil && srcID == dstID
	}
	if same {
		return fmt.Errorf("source %s (%s) and target %s (%s): %w", src.Name, src.Config.Host, dst.Name, dst.Config.Host, ErrSameCluster)
	}
	return nil
}

// Validate checks the options before anything is read or written.
func (o *Options) Validate() error {
	o.complete()
	if o.Source == nil || o.Target == nil || o.Location == nil {
		return errors.New("migration: the source, the target and the location are required")
	}
	if err := ValidateName(o.Name); err != nil {
		return err
	}
	if err := o.Backup.Validate(); err != nil {
		return err
	}
	return o.Restore.Validate()
}

func (o *Options) complete() {
	o.Backup.Name, o.Restore.Name, o.Restore.Spec.BackupName = o.Name, o.Name, o.Name
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Backup.Log == nil {
		o.Backup.Log = o.Log
	}
	if o.Restore.Log == nil {
		o.Restore.Log = o.Log
	}
}

func (o *Options) step(s Step) {
	o.Log.Info("migration step", "migration", o.Name, "step", s)
	if o.OnStep != nil {
		o.OnStep(s)
	}
}

// Run backs up the source, restores into the target and verifies it.
// With Resume, a migration run again under its name after an
// interruption resumes (Prepare): its committed backup is reused and its
// restore finished. An error means a step could not run at all (the backup's name is taken, the
// location cannot be written, the context ended); a step that ran and
// failed is in the Result (Outcome). A backup that partially failed still
// goes on to the restore.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	res := &Result{}
	if err := CheckClusters(ctx, o.Source, o.Target); err != nil {
		return res, err
	}
	var reused *v1alpha1.Backup
	var err error
	if o.Resume {
		if reused, err = Prepare(ctx, o.Location, o.Name, o.Backup.Spec); err != nil {
			return res, err
		}
	}
	if reused != nil {
		// A migration run again after an interruption: its backup is
		// committed, and the restore finishes what the first run left.
		o.Log.Info("resuming migration: its committed backup is reused", "migration", o.Name, "backup", reused.Name, "phase", reused.Status.Phase)
		res.Backup, res.Resumed = reused, true
		if o.OnBackup != nil {
			o.OnBackup(reused, nil, true)
		}
		return res, restoreAndVerify(ctx, &o, res)
	}
	o.step(StepBackup)
	bopts := o.Backup
	next := bopts.OnStage
	bopts.OnStage = func(s string) {
		o.step(Step(s))
		if next != nil {
			next(s)
		}
	}
	var bres *report.Results
	if res.Backup, bres, err = backup.Run(ctx, o.Source, o.Location, bopts); err != nil {
		return res, fmt.Errorf("backup %s: %w", o.Name, err)
	}
	if o.OnBackup != nil {
		o.OnBackup(res.Backup, bres, false)
	}
	if res.Backup.Status.Phase == v1alpha1.PhaseFailed {
		return res, nil
	}
	return res, restoreAndVerify(ctx, &o, res)
}

// restoreAndVerify restores the migration's backup into the target, then
// verifies the target.
func restoreAndVerify(ctx context.Context, o *Options, res *Result) error {
	var err error
	o.step(StepRestore)
	var rres *report.Results
	if res.Restore, rres, err = restore.Run(ctx, o.Target, o.Location, o.Restore); err != nil {
		return fmt.Errorf("restore %s: %w", o.Name, err)
	}
	if o.OnRestore != nil {
		o.OnRestore(res.Restore, rres)
	}
	if o.Restore.Spec.DryRun {
		res.RestoreResults = rres
	}
	if !o.Verify || o.Restore.Spec.DryRun || res.Restore.Status.Phase == v1alpha1.PhaseFailed {
		return nil
	}
	o.step(StepVerify)
	if res.Verification, err = verify(ctx, o, res); err != nil {
		return fmt.Errorf("%w of migration %s: %w", ErrVerification, o.Name, err)
	}
	return nil
}

// verify is VerifyRestore of the migration's restore, within its
// deadline.
func verify(ctx context.Context, o *Options, res *Result) (*report.Verification, error) {
	vopts := o.Restore
	vopts.Name = o.Name
	ctx, cancel := o.Restore.VerifyDeadline.Context(ctx, "verification")
	defer cancel()
	v, err := verifyRestore(ctx, o.Target, o.Location, vopts, res.Backup, res.Restore, o.OnVerifyProgress, o.Estimate)
	return v, deadline.Cause(ctx, err)
}

// VerifyRestore compares the target with the backup a restore restored
// (the restore's options ropts; ropts.Name names the restore), with the
// backup's and the restore's timings when given, and keeps the report in
// the location (ReportKeys of the restore's name): the verification of
// ferry migrate, of a hub Migration and of a server-mode Restore with
// spec.verify. A report the location could not keep is returned with the
// error.
func VerifyRestore(ctx context.Context, target *kube.Cluster, loc *store.Location, ropts restore.Options, b *v1alpha1.Backup, rs *v1alpha1.Restore, onProgress func(done, total int)) (*report.Verification, error) {
	return verifyRestore(ctx, target, loc, ropts, b, rs, onProgress, nil)
}

// timings are a verification's steps (the backup's and the restore's
// own timestamps, when given, then verified) and, with a pre-flight's
// estimate, a copy of it with each step's actual time.
func timings(b *v1alpha1.Backup, rs *v1alpha1.Restore, verified report.Timing, est *report.Estimate) ([]report.Timing, *report.Estimate) {
	var t []report.Timing
	if b != nil {
		if s, e := b.Status.StartTimestamp, b.Status.CompletionTimestamp; s != nil && e != nil {
			t = append(t, report.NewTiming("backup", s.Time, e.Time))
		}
	}
	if rs != nil {
		if s, e := rs.Status.StartTimestamp, rs.Status.CompletionTimestamp; s != nil && e != nil {
			t = append(t, report.NewTiming("restore", s.Time, e.Time))
		}
	}
	t = append(t, verified)
	if est == nil {
		return t, nil
	}
	e := *est
	e.Parts = append([]report.EstimatePart(nil), est.Parts...)
	e.SetActual(t)
	return t, &e
}

// verifyRestore is VerifyRestore with a pre-flight's estimate (nil: none),
// shown against the actual times.
func verifyRestore(ctx context.Context, target *kube.Cluster, loc *store.Location, ropts restore.Options, b *v1alpha1.Backup, rs *v1alpha1.Restore, onProgress func(done, total int), est *report.Estimate) (*report.Verification, error) {
	ropts.OnProgress = onProgress
	start := time.Now()
	v, err := restore.Verify(ctx, target, loc, ropts)
	if err != nil {
		return nil, err
	}
	v.Restore = ropts.Name
	v.Running = checkRunning(ctx, target, loc, ropts, b, v)
	verified := report.NewTiming("verify", start, time.Now()) // the objects compared, then the runtime checks
	v.Timings, v.Estimate = timings(b, rs, verified, est)
	jsonKey, htmlKey := ReportKeys(ropts.Name)
	if err := put(ctx, loc, jsonKey, v.WriteJSON); err != nil {
		return v, fmt.Errorf("keeping the report in the location: %w", err)
	}
	if err := put(ctx, loc, htmlKey, v.WriteHTML); err != nil {
		return v, fmt.Errorf("keeping the report in the location: %w", err)
	}
	return v, nil
}

// VerifyAndRecord verifies restore rs after it ran (VerifyRestore),
// writes the outcome into its status (ApplyVerification) and rewrites its
// record in the location with it, so that the location says what the
// front end says: restore create --verify and a server-mode Restore with
// spec.verify. A failed restore, or a dry run, is not verified. The
// error is the record's.
func VerifyAndRecord(ctx context.Context, target *kube.Cluster, loc *store.Location, ropts restore.Options, rs *v1alpha1.Restore, onProgress func(done, total int)) error {
	if rs.Status.Phase == v1alpha1.PhaseFailed || rs.Spec.DryRun {
		return nil
	}
	b, _ := loc.GetBackup(ctx, rs.Spec.BackupName) // nil: the timings leave the backup out
	// The restore's pod volume options are done with; only its helper
	// pods' claim check is the verification's (checkData).
	if pv := ropts.PodVolumes; pv != nil && pv.CheckClaims != nil {
		ropts.PodVolumes = &restore.PodVolumeOptions{CheckClaims: pv.CheckClaims}
	} else {
		ropts.PodVolumes = nil
	}
	vctx, cancel := ropts.VerifyDeadline.Context(ctx, "verification")
	defer cancel()
	v, err := VerifyRestore(vctx, target, loc, ropts, b, rs, onProgress)
	ApplyVerification(rs, v, deadline.Cause(vctx, err))
	if err := restore.Record(ctx, loc, rs); err != nil {
		return fmt.Errorf("recording the verification of restore %s in the location: %w", rs.Name, err)
	}
	return nil
}

// ApplyVerification writes the outcome of VerifyRestore (v, err) of
// restore rs into its status.verification: the report's counts, its keys
// in the location (when it was kept), the error. A difference the restore
// did not expect, or a verification that could not finish, makes a
// Completed restore PartiallyFailed, saying why: the same rule for a
// server-mode Restore with spec.verify and ferry restore create --verify.
func ApplyVerification(rs *v1alpha1.Restore, v *report.Verification, err error) {
	sum := &v1alpha1.VerificationSummary{}
	if v != nil {
		s := v.Summary
		sum.Objects, sum.Matched, sum.Differ, sum.Missing, sum.Failed, sum.Unexpected = s.Objects, s.Matched, s.Differ, s.Missing, s.Failed, s.Unexpected
	}
	if v != nil && v.Running != nil && v.Running.Skipped == "" {
		c := v.Running.Counts
		sum.Running = &v1alpha1.RunningSummary{Workloads: c.Workloads, WorkloadsRunning: c.WorkloadsRunning, Services: c.Services, ServicesServing: c.ServicesServing,
			Claims: c.Claims, ClaimsBound: c.ClaimsBound,
			ClaimsWithData: c.ClaimsWithData, ClaimsEqual: c.ClaimsEqual + c.ClaimsChangedByApp, Images: c.Images, ImagesPresent: c.ImagesPresent, Failed: c.Failed}
	}
	j, h := ReportKeys(rs.Name)
	why := ""
	switch {
	case err != nil: // the report is not (all) in the location
		sum.Error = err.Error()
		why = "verification: " + err.Error()
	case sum.Unexpected > 0:
		why = fmt.Sprintf("verification: %d of %d object(s) differ from the backup, are missing or could not be compared (report: %s)", sum.Unexpected, sum.Objects, h)
	case sum.Running != nil && sum.Running.Failed > 0:
		why = fmt.Sprintf("verification: %s; first: %s (report: %s)", v.Running.Headline(), firstFailure(v.Running), h)
	}
	if err == nil {
		sum.Report = []string{j, h}
	}
	rs.Status.Verification = sum
	if why != "" && rs.Status.Phase == v1alpha1.PhaseCompleted {
		rs.Status.Phase = v1alpha1.PhasePartiallyFailed
		rs.Status.FailureReason = why
	}
}

// put writes what render writes to key, sealed when the location is
// encrypted.
func put(ctx context.Context, loc *store.Location, key string, render func(io.Writer) error) error {
	w, err := loc.NewSealedWriter(ctx, key)
	if err != nil {
		return err
	}
	if err := render(w); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}

// OpenReport reads migration name's HTML (html) or JSON verification
// report from the location; store.ErrNotFound (wrapped) when there is none.
func OpenReport(ctx context.Context, loc *store.Location, name string, html bool) ([]byte, error) {
	r, err := ReportReader(ctx, loc, name, html)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// ReportReader is OpenReport as a stream, which the caller closes.
func ReportReader(ctx context.Context, loc *store.Location, name string, html bool) (io.ReadCloser, error) {
	jsonKey, htmlKey := ReportKeys(name)
	key := jsonKey
	if html {
		key = htmlKey
	}
	ok, err := loc.Exists(ctx, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("report of migration %s: %w", name, store.ErrNotFound)
	}
	return loc.NewOpenedReader(ctx, key)
}
