package migration

import (
	"slices"
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/registry"
	engine "github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/modifiers"
	"github.com/kubeferry/ferry/pkg/transform"
)

// ValidateMigration checks a Migration's metadata and spec, but for whether
// its Clusters exist (the strategy looks them up).
func ValidateMigration(m *ferry.Migration) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&m.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if m.Name != "" && len(errs) == 0 {
		// The name is the backup's and the restore's in the location.
		if err := engine.ValidateName(m.Name); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), m.Name, err.Error()))
		}
	}
	if m.Spec.Staged != nil && m.Name != "" {
		// Its stages and cutovers are named NAME-stage-N, NAME-cutover-N.
		if err := engine.ValidateStagedName(m.Name); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), m.Name, err.Error()))
		}
	}
	return append(errs, ValidateMigrationSpec(&m.Spec, field.NewPath("spec"))...)
}

// ValidateMigrationSpec checks a Migration's spec.
func ValidateMigrationSpec(s *ferry.MigrationSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateClusterName(s.Source.Cluster, p.Child("source", "cluster"))...)
	errs = append(errs, validateClusterName(s.Target.Cluster, p.Child("target", "cluster"))...)
	if s.Source.Cluster != "" && s.Source.Cluster == s.Target.Cluster {
		errs = append(errs, field.Invalid(p.Child("target", "cluster"), s.Target.Cluster, "must differ from spec.source.cluster: a migration moves between two clusters"))
	}
	errs = append(errs, validateStorage(&s.Storage, p.Child("storage"))...)
	errs = append(errs, registry.ValidateEncryption(&s.Encryption, p.Child("encryption"))...)
	errs = append(errs, validateBackup(&s.Backup, p.Child("backup"))...)
	errs = append(errs, validateRestore(&s.Restore, p.Child("restore"))...)
	if t := s.Timeouts; t != nil {
		for i, d := range []*metav1.Duration{t.Backup, t.Restore, t.Verify} {
			if d != nil && d.Duration < 0 {
				name := []string{"backup", "restore", "verify"}[i]
				errs = append(errs, field.Invalid(p.Child("timeouts", name), d.Duration.String(), "must not be negative (0: no deadline)"))
			}
		}
	}
	if rt := s.VerifyRuntime; rt != nil && rt.Timeout != nil && rt.Timeout.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("verifyRuntime", "timeout"), rt.Timeout.Duration.String(), "must not be negative"))
	}
	errs = append(errs, validateStaged(s, p.Child("staged"))...)
	switch {
	case s.PreflightOnly && s.Staged != nil:
		errs = append(errs, field.Forbidden(p.Child("preflightOnly"), "a staged Migration runs its own stages: check it first with a Migration of spec.preflightOnly alone"))
	case s.PreflightOnly && s.Restore.DryRun:
		errs = append(errs, field.Forbidden(p.Child("preflightOnly"), "a pre-flight sends every object as a dry-run create already: unset spec.restore.dryRun"))
	}
	return append(errs, validateImages(&s.Images, p.Child("images"))...)
}

// minStageInterval is the shortest spec.staged.interval.
const minStageInterval = 10 * time.Second

func validateStaged(spec *ferry.MigrationSpec, p *field.Path) field.ErrorList {
	s := spec.Staged
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	// What no stage takes: the engine's own check, on the specs the hub's
	// controller gives it.
	b, r := spec.Backup, spec.Restore
	bs := v1alpha1.BackupSpec{IncludedNamespaces: b.IncludedNamespaces, ExcludedNamespaces: b.ExcludedNamespaces,
		IncludedResources: b.IncludedResources, ExcludedResources: b.ExcludedResources, LabelSelector: b.LabelSelector}
	rs := v1alpha1.RestoreSpec{DryRun: r.DryRun}
	if spec.VerifyRuntime != nil && spec.VerifyRuntime.Skip {
		rs.VerifyRuntime = &v1alpha1.RuntimeVerification{Skip: true}
	}
	if len(b.IncludedNamespaces) == 0 {
		errs = append(errs, field.Required(field.NewPath("spec", "backup", "includedNamespaces"), "a staged Migration names the namespaces it moves: its cutover quiesces every workload in them"))
	} else if err := engine.CheckStagedSpecs(bs, rs); err != nil {
		errs = append(errs, field.Forbidden(p, "a staged Migration does not take "+err.Error()))
	}
	if s.Interval.Duration == 0 {
		errs = append(errs, field.Required(p.Child("interval"), "the time from one stage's start to the next's, at least "+minStageInterval.String()))
	} else if s.Interval.Duration < minStageInterval {
		errs = append(errs, field.Invalid(p.Child("interval"), s.Interval.Duration.String(), "must be at least "+minStageInterval.String()))
	}
	if s.MaxDowntime != nil && s.MaxDowntime.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("maxDowntime"), s.MaxDowntime.Duration.String(), "must be positive"))
	}
	if s.MaxStages < 0 {
		errs = append(errs, field.Invalid(p.Child("maxStages"), s.MaxStages, "must not be negative"))
	}
	if s.MaxStages > 0 && s.MaxDowntime == nil {
		errs = append(errs, field.Required(p.Child("maxDowntime"), "spec.staged.maxStages bounds the stages run to get under it"))
	}
	return errs
}

// ValidateMigrationUpdate refuses every change to a Migration's spec but
// those of a staged one's spec.staged: a Migration runs once, and its
// status describes the spec it ran. A staged Migration's interval and
// limits may be tuned until the cutover is triggered, and
// spec.staged.cutover may be set, never unset; spec.staged may be neither
// added nor removed.
func ValidateMigrationUpdate(s, old *ferry.MigrationSpec, p *field.Path) field.ErrorList {
	sp := p.Child("staged")
	switch {
	case old.Staged == nil && s.Staged != nil:
		return field.ErrorList{field.Forbidden(sp, "may be set only when the Migration is created")}
	case old.Staged != nil && s.Staged == nil:
		return field.ErrorList{field.Forbidden(sp, "may not be removed from a staged Migration")}
	case old.Staged == nil:
		return registry.ValidateImmutable(s, old, p, "a Migration runs once and its status describes the spec it ran; create another Migration to run another spec")
	}
	var errs field.ErrorList
	if old.Staged.Cutover && !s.Staged.Cutover {
		errs = append(errs, field.Forbidden(sp.Child("cutover"), "may not be unset once the cutover was triggered (ferry migrate rollback undoes a cutover)"))
	}
	a := *s
	if !old.Staged.Cutover {
		// Before the cutover the stages' knobs may change.
		a.Staged = old.Staged
	} else {
		staged := *s.Staged
		staged.Cutover = true
		a.Staged = &staged
	}
	return append(errs, registry.ValidateImmutable(&a, old, p, "a staged Migration's stages and cutover move what its first stage selected; only spec.staged may change, and only until the cutover is triggered")...)
}

func validateClusterName(name string, p *field.Path) field.ErrorList {
	return registry.ValidateReference(name, "Cluster", p)
}

func validateStorage(s *ferry.MigrationStorage, p *field.Path) field.ErrorList {
	errs := registry.ValidateLocationURL(s.Location, p.Child("location"))
	if s.CredentialRef != nil {
		errs = append(errs, registry.ValidateReference(s.CredentialRef.Name, "Credential", p.Child("credentialRef", "name"))...)
	}
	return errs
}

func validateBackup(b *ferry.MigrationBackup, p *field.Path) field.ErrorList {
	return registry.ValidateSelection(b.IncludedNamespaces, b.ExcludedNamespaces, b.LabelSelector, b.IncludeClusterResources, b.TTL, p)
}

func validateRestore(r *ferry.MigrationRestore, p *field.Path) field.ErrorList {
	errs := registry.ValidateMappings(r.NamespaceMapping, r.StorageClassMapping, r.ExistingResourcePolicy, p)
	if pol := v1alpha1.ExistingVolumeDataPolicy(r.ExistingVolumeDataPolicy); pol != "" && pol != v1alpha1.VolumeDataWrite && pol != v1alpha1.VolumeDataKeep {
		errs = append(errs, field.NotSupported(p.Child("existingVolumeDataPolicy"), pol, []v1alpha1.ExistingVolumeDataPolicy{v1alpha1.VolumeDataWrite, v1alpha1.VolumeDataKeep}))
	}
	for _, c := range []struct{ field, name string }{{"fromCloud", r.FromCloud}, {"toCloud", r.ToCloud}} {
		if c.name == "" {
			continue
		}
		if _, err := transform.LoadCloudProfile(c.name); err != nil {
			errs = append(errs, field.Invalid(p.Child(c.field), c.name, err.Error()))
		}
	}
	if r.ResourceModifiers != "" {
		if _, err := modifiers.Parse([]byte(r.ResourceModifiers)); err != nil {
			errs = append(errs, field.Invalid(p.Child("resourceModifiers"), field.OmitValueType{}, err.Error()))
		}
	}
	if r.CRDTimeout != nil && r.CRDTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("crdTimeout"), r.CRDTimeout.Duration.String(), "must not be negative"))
	}
	return errs
}

func validateImages(im *ferry.MigrationImages, p *field.Path) field.ErrorList {
	return registry.ValidateImages(im.Mode, im.RegistryMappings, p.Child("mode"), p.Child("registryMappings"))
}

// ValidateMigrationStatus checks a status update.
func ValidateMigrationStatus(s *ferry.MigrationStatus, p *field.Path) field.ErrorList {
	phases := []ferry.MigrationPhase{"", ferry.PhasePending, ferry.PhaseBackup, ferry.PhaseImages, ferry.PhaseVolumes,
		ferry.PhaseRestore, ferry.PhaseVerify, ferry.PhaseStaging, ferry.PhaseStaged, ferry.PhasePreflight, ferry.PhaseQuiesce, ferry.PhaseCompleted, ferry.PhasePartiallyFailed, ferry.PhaseFailed}
	var errs field.ErrorList
	if !slices.Contains(phases, s.Phase) {
		errs = append(errs, field.NotSupported(p.Child("phase"), s.Phase, phases[1:]))
	}
	errs = append(errs, metav1validation.ValidateConditions(s.Conditions, p.Child("conditions"))...)
	if s.ObservedGeneration < 0 {
		errs = append(errs, field.Invalid(p.Child("observedGeneration"), s.ObservedGeneration, "must not be negative"))
	}
	return append(errs, registry.ValidateNonNegative(p.Child("counts"), map[string]int64{
		"backedUp": s.Counts.BackedUp, "restored": s.Counts.Restored, "failed": s.Counts.Failed, "skipped": s.Counts.Skipped})...)
}
