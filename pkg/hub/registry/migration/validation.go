package migration

import (
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeferry/ferry/pkg/filter"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/store"
)

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// ValidateMigration checks a Migration's metadata and spec, but for whether
// its Clusters exist (the strategy looks them up).
func ValidateMigration(m *ferry.Migration) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&m.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
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
	errs = append(errs, validateBackup(&s.Backup, p.Child("backup"))...)
	errs = append(errs, validateRestore(&s.Restore, p.Child("restore"))...)
	return append(errs, validateImages(&s.Images, p.Child("images"))...)
}

func validateClusterName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "the name of a Cluster in the Migration's namespace")}
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func validateStorage(s *ferry.MigrationStorage, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Location == "" {
		errs = append(errs, field.Required(p.Child("location"), "the backup storage location's URL (file://, s3://, gs://, azblob://)"))
	} else if err := store.ValidateURL(s.Location); err != nil {
		errs = append(errs, field.Invalid(p.Child("location"), store.Redact(s.Location), err.Error()))
	}
	if s.CredentialRef != nil {
		errs = append(errs, field.Forbidden(p.Child("credentialRef"), "not supported yet: the hub opens the location with its own credentials (its environment)"))
	}
	return errs
}

func validateBackup(b *ferry.MigrationBackup, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateGlobs(b.IncludedNamespaces, p.Child("includedNamespaces"))...)
	errs = append(errs, validateGlobs(b.ExcludedNamespaces, p.Child("excludedNamespaces"))...)
	if b.LabelSelector != "" {
		if _, err := labels.Parse(b.LabelSelector); err != nil {
			errs = append(errs, field.Invalid(p.Child("labelSelector"), b.LabelSelector, err.Error()))
		}
	}
	if v := b.IncludeClusterResources; !slices.Contains([]string{"auto", "true", "false"}, v) {
		errs = append(errs, field.NotSupported(p.Child("includeClusterResources"), v, []string{"auto", "true", "false"}))
	}
	if b.TTL != nil && b.TTL.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("ttl"), b.TTL.Duration.String(), "must not be negative (empty or 0: kept until deleted)"))
	}
	return errs
}

// validateGlobs checks namespace globs as a backup does (pkg/filter).
func validateGlobs(globs []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, g := range globs {
		if _, err := filter.NewNamespaces([]string{g}, nil); err != nil {
			errs = append(errs, field.Invalid(p.Index(i), g, err.Error()))
		}
	}
	return errs
}

func validateRestore(r *ferry.MigrationRestore, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for from, to := range r.NamespaceMapping {
		mp := p.Child("namespaceMapping").Key(from)
		for _, name := range []string{from, to} {
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(mp, name, msg))
			}
		}
	}
	for from, to := range r.StorageClassMapping {
		if from == "" || to == "" {
			errs = append(errs, field.Invalid(p.Child("storageClassMapping").Key(from), to, "storage class names must not be empty"))
		}
	}
	if v := r.ExistingResourcePolicy; v != "none" && v != "update" {
		errs = append(errs, field.NotSupported(p.Child("existingResourcePolicy"), v, []string{"none", "update"}))
	}
	return errs
}

func validateImages(im *ferry.MigrationImages, p *field.Path) field.ErrorList {
	modes := []string{"none", "record", "copy", "bundle"}
	var errs field.ErrorList
	if !slices.Contains(modes, im.Mode) {
		errs = append(errs, field.NotSupported(p.Child("mode"), im.Mode, modes))
	}
	if im.Mode == "copy" && len(im.RegistryMappings) == 0 {
		errs = append(errs, field.Required(p.Child("registryMappings"), `mode "copy" needs the target registries (OLD=NEW)`))
	}
	return errs
}

// ValidateMigrationStatus checks a status update.
func ValidateMigrationStatus(s *ferry.MigrationStatus, p *field.Path) field.ErrorList {
	phases := []ferry.MigrationPhase{"", ferry.PhasePending, ferry.PhaseBackup, ferry.PhaseImages, ferry.PhaseVolumes,
		ferry.PhaseRestore, ferry.PhaseVerify, ferry.PhaseCompleted, ferry.PhasePartiallyFailed, ferry.PhaseFailed}
	var errs field.ErrorList
	if !slices.Contains(phases, s.Phase) {
		errs = append(errs, field.NotSupported(p.Child("phase"), s.Phase, phases[1:]))
	}
	errs = append(errs, metav1validation.ValidateConditions(s.Conditions, p.Child("conditions"))...)
	if s.ObservedGeneration < 0 {
		errs = append(errs, field.Invalid(p.Child("observedGeneration"), s.ObservedGeneration, "must not be negative"))
	}
	counts := []struct {
		name string
		n    int64
	}{{"backedUp", s.Counts.BackedUp}, {"restored", s.Counts.Restored}, {"failed", s.Counts.Failed}, {"skipped", s.Counts.Skipped}}
	for _, c := range counts {
		if c.n < 0 {
			errs = append(errs, field.Invalid(p.Child("counts", c.name), c.n, "must not be negative"))
		}
	}
	return errs
}
