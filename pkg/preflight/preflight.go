// Package preflight is a migration's pre-flight check: before anything is
// written to either cluster or to the location, it reads the source (live,
// or a stored backup) and the target, and says whether the move will
// work, what will break, and how long it will take (report.Preflight).
// The objects it checks are those a restore would write, as it would
// write them: a dry-run restore feeds them to the checks
// (docs/design.md#pre-flight).
package preflight

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
)

// Options are one pre-flight check's: a migration's options, read but
// not carried out.
type Options struct {
	// Source is read live; nil reads Restore.Spec.BackupName from
	// Location instead.
	Source *kube.Cluster
	Target *kube.Cluster
	// Location holds the stored backup (when Source is nil).
	Location *store.Location
	// Backup is the migration's backup: its selection (Spec) is what the
	// check reads from a live source. Nothing is written: the backup goes
	// to memory, without volume data, images or encryption.
	Backup backup.Options
	// Restore is the migration's restore: its mappings, modifiers and
	// policies are applied as the restore would, in a dry run.
	Restore restore.Options
	// Images is the registry access the image checks resolve references
	// with (the target's pull Secrets are added to its keychain).
	Images images.Options
	// VolumeData says the migration moves pod volume data through helper
	// pods; HelperImage is their image. NoVolumeData says why it moves
	// none ("" when it does, through helper pods or otherwise): the pods
	// that ask for theirs lose it in the move, a blocker.
	VolumeData   bool
	HelperImage  string
	NoVolumeData string
	// VolumeProbe, with Estimate, measures the volume data's path for
	// the estimate (probe pods in both clusters; nil: no volume estimate).
	VolumeProbe *VolumeProbe
	// PullProbe has the target's nodes pull every image the workloads
	// name, from a probe pod each (removed when it ends), beside the
	// check from where ferry runs.
	PullProbe bool
	// Estimate probes the target's create rate and estimates the time.
	Estimate bool
	Log      *slog.Logger
}

// WithVolumeData sets how the migration moves pod volume data: through
// helper pods, and why none moves ("" when some does).
func (o Options) WithVolumeData(helperPods bool, none string) Options {
	o.VolumeData, o.NoVolumeData = helperPods, none
	return o
}

// Validate checks the options before anything is read.
func (o *Options) Validate() error {
	switch {
	case o.Target == nil:
		return errors.New("preflight: the target cluster is required")
	case o.Source == nil && (o.Location == nil || o.Restore.Spec.BackupName == ""):
		return errors.New("preflight: a source cluster, or a location and spec.backupName, is required")
	}
	return nil
}

// Run checks a migration before it runs and returns the report. It
// writes nothing to either cluster or the location but the estimate's
// probes: dry-run creates, and with VolumeProbe a probe pod (its Secret
// and Lease) in each cluster and a probe data set in the location, all
// removed before it returns. An error means the check could not run (a
// cluster unreachable, the backup unreadable); what it found is in the
// report.
func Run(ctx context.Context, o Options) (*report.Preflight, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	p := &report.Preflight{Created: time.Now().UTC(), Target: o.Target.Config.Host}
	c := newCollector()
	src, err := o.read(ctx, p)
	if err != nil {
		return nil, err
	}
	defer src.close()
	ropts := o.Restore
	ropts.Name = src.backup
	ropts.Spec.BackupName = src.backup
	ropts.Spec.DryRun, ropts.Spec.Verify, ropts.Spec.PushImages, ropts.Spec.PreflightOnly = true, false, false, false
	ropts.PodVolumes = nil
	ropts.OnDryRun = c.observe
	ropts.Log = o.Log
	rs, results, err := restore.Run(ctx, o.Target, src.loc, ropts)
	if err != nil {
		return nil, fmt.Errorf("preflight: the dry-run restore into %s: %w", o.Target.Name, err)
	}
	if rs.Status.Phase == v1alpha1.PhaseFailed {
		// Cut short (spec.timeouts.restore), or the backup unreadable:
		// what it checked is not all, and saying less would be wrong.
		return nil, fmt.Errorf("preflight: the dry-run restore into %s did not finish: %s", o.Target.Name, rs.Status.FailureReason)
	}
	p.Objects = c.count
	// The checks judge what the move writes: not what the target keeps.
	c.drop(existingIn(results, false))
	if c.count == 0 {
		p.Add(report.Risk{Severity: report.Warning, Check: "dry-run", What: "the selection matches no object to restore: the move would move nothing",
			Fix: "check the namespaces and resources the migration includes"})
	}
	t, err := readTarget(ctx, o.Target)
	if err != nil {
		return nil, err
	}
	e := &env{o: &o, c: c, t: t, results: results, p: p}
	if o.Source != nil {
		if e.unbound, err = unboundClaims(ctx, o.Source, &o.Restore); err != nil {
			return nil, err
		}
	}
	e.run(ctx)
	if o.Estimate {
		p.Estimate = e.estimate(ctx, src)
	}
	p.Rank()
	return p, nil
}

// source is what the check reads the objects from: a backup in a
// location, the in-memory one of a live source's.
type source struct {
	loc    *store.Location
	backup string
	// took is the time the live source's backup took (0 for a stored one).
	took time.Duration
	// memory is true for the in-memory location, closed by close.
	memory bool
}

func (s *source) close() {
	if s.memory {
		_ = s.loc.Close()
	}
}

// read backs the live source up into memory (without volume data,
// images or encryption), or names the stored backup.
func (o *Options) read(ctx context.Context, p *report.Preflight) (*source, error) {
	if o.Source == nil {
		p.Source = "backup " + o.Restore.Spec.BackupName
		return &source{loc: o.Location, backup: o.Restore.Spec.BackupName}, nil
	}
	p.Source = o.Source.Config.Host
	mem, err := store.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	bopts := o.Backup
	bopts.Name = "preflight"
	bopts.PodVolumes = nil
	bopts.Spec.EncryptionRecipients = nil
	bopts.Spec.TTL = nil
	switch {
	case len(o.Restore.Spec.ImageRegistryMappings) == 0:
		// Nothing is rewritten, so no digest is pinned: the image check
		// resolves the images itself, once.
		bopts.Spec.Images = images.ModeNone
	case bopts.Spec.Images != images.ModeNone:
		// Record resolves the digests the rewrite pins, as the move will;
		// it never copies.
		bopts.Spec.Images = images.ModeRecord
	}
	bopts.Spec.ImagesRequired = false
	bopts.Images = o.Images
	bopts.Log = o.Log
	start := time.Now()
	b, res, err := backup.Run(ctx, o.Source, mem, bopts)
	if err != nil {
		_ = mem.Close()
		return nil, fmt.Errorf("preflight: reading source %s: %w", o.Source.Name, err)
	}
	src := &source{loc: mem, backup: b.Name, took: time.Since(start), memory: true}
	p.Checks = append(p.Checks, "source")
	for _, w := range res.Warnings {
		p.Add(report.Risk{Severity: report.Warning, Check: "source", What: "reading the source: " + w})
	}
	for _, w := range res.Errors {
		p.Add(report.Risk{Severity: report.Blocker, Check: "source", What: "reading the source: " + w + ": what it names would not be moved"})
	}
	for _, it := range res.Items {
		if it.Outcome == report.Failed {
			p.Add(report.Risk{Severity: report.Blocker, Check: "source", Objects: []string{objectName(it.Resource, it.Namespace, it.Name)},
				What: "cannot be read from the source, so it would not be moved: " + it.Message, Fix: "give ferry's user get and list on it in the source, or spec.excludedResources " + it.Resource})
		}
	}
	return src, nil
}

// unboundClaims are the source's claims that are not Bound there, by
// their name in the target ("namespace/name", after the namespace
// mapping): what keeps them unbound in the target is no loss the move
// makes.
func unboundClaims(ctx context.Context, src *kube.Cluster, ropts *restore.Options) (map[string]bool, error) {
	l, err := src.Typed.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return nil, nil // every claim counts as bound: none is exempt
	}
	if err != nil {
		return nil, fmt.Errorf("preflight: listing the claims of source %s: %w", src.Name, err)
	}
	out := map[string]bool{}
	for _, c := range l.Items {
		if c.Status.Phase != corev1.ClaimBound {
			ns := c.Namespace
			if m := ropts.Spec.NamespaceMapping[ns]; m != "" {
				ns = m
			}
			out[ns+"/"+c.Name] = true
		}
	}
	return out, nil
}

// objectName is how a risk names an object: "resource namespace/name",
// or "resource name" for a cluster-scoped one.
func objectName(resource, ns, name string) string {
	if ns == "" {
		return resource + " " + name
	}
	return resource + " " + ns + "/" + name
}
