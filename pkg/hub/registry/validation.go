package registry

import (
	"maps"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeferry/ferry/pkg/filter"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/store"
)

// ValidateReference checks the name of an object of kind, in the
// referrer's namespace, that p must name.
func ValidateReference(name, kind string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "the name of a "+kind+" in the same namespace")}
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// ValidateGlobs checks namespace globs as a backup does (pkg/filter).
func ValidateGlobs(globs []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, g := range globs {
		if _, err := filter.NewNamespaces([]string{g}, nil); err != nil {
			errs = append(errs, field.Invalid(p.Index(i), g, err.Error()))
		}
	}
	return errs
}

// ValidateSelection checks a backup's selection: namespace globs, the
// label selector, includeClusterResources, and the TTL, at p's children.
func ValidateSelection(included, excluded []string, selector, clusterResources string, ttl *metav1.Duration, p *field.Path) field.ErrorList {
	errs := ValidateGlobs(included, p.Child("includedNamespaces"))
	errs = append(errs, ValidateGlobs(excluded, p.Child("excludedNamespaces"))...)
	if selector != "" {
		if _, err := labels.Parse(selector); err != nil {
			errs = append(errs, field.Invalid(p.Child("labelSelector"), selector, err.Error()))
		}
	}
	if v := clusterResources; !slices.Contains([]string{"auto", "true", "false"}, v) {
		errs = append(errs, field.NotSupported(p.Child("includeClusterResources"), v, []string{"auto", "true", "false"}))
	}
	if ttl != nil && ttl.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("ttl"), ttl.Duration.String(), "must not be negative (empty or 0: kept until deleted)"))
	}
	return errs
}

// ValidateMappings checks a restore's namespace and storage class
// mappings and its existing-resource policy, at p's children.
func ValidateMappings(namespaces, storageClasses map[string]string, policy string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for from, to := range namespaces {
		mp := p.Child("namespaceMapping").Key(from)
		for _, name := range []string{from, to} {
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(mp, name, msg))
			}
		}
	}
	for from, to := range storageClasses {
		if from == "" || to == "" {
			errs = append(errs, field.Invalid(p.Child("storageClassMapping").Key(from), to, "storage class names must not be empty"))
		}
	}
	if policy != "none" && policy != "update" {
		errs = append(errs, field.NotSupported(p.Child("existingResourcePolicy"), policy, []string{"none", "update"}))
	}
	return errs
}

// ValidateImages checks an images mode (at modePath) and, for copy, that
// registry mappings (at mappingsPath) are given.
func ValidateImages(mode string, mappings []string, modePath, mappingsPath *field.Path) field.ErrorList {
	modes := []string{"none", "record", "copy", "bundle"}
	var errs field.ErrorList
	if !slices.Contains(modes, mode) {
		errs = append(errs, field.NotSupported(modePath, mode, modes))
	}
	if mode == "copy" && len(mappings) == 0 {
		errs = append(errs, field.Required(mappingsPath, `mode "copy" needs the target registries (OLD=NEW)`))
	}
	return errs
}

// ValidateLocationURL checks a backup storage location's URL.
func ValidateLocationURL(url string, p *field.Path) field.ErrorList {
	if url == "" {
		return field.ErrorList{field.Required(p, "the backup storage location's URL (file://, s3://, gs://, azblob://)")}
	}
	if err := store.ValidateURL(url); err != nil {
		return field.ErrorList{field.Invalid(p, store.Redact(url), err.Error())}
	}
	return nil
}

// ValidateNonNegative checks counts, by their field names under p.
func ValidateNonNegative(p *field.Path, counts map[string]int64) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if n := counts[name]; n < 0 {
			errs = append(errs, field.Invalid(p.Child(name), n, "must not be negative"))
		}
	}
	return errs
}

// ValidatePhase checks a Backup's or Restore's status.phase.
func ValidatePhase(phase ferry.RunPhase, p *field.Path) field.ErrorList {
	phases := []ferry.RunPhase{ferry.RunNew, ferry.RunInProgress, ferry.RunCompleted, ferry.RunPartiallyFailed, ferry.RunFailed}
	if phase != "" && !slices.Contains(phases, phase) {
		return field.ErrorList{field.NotSupported(p, phase, phases)}
	}
	return nil
}

// ValidateEncryption checks that the recipients are age public keys and
// that recipients come with an identity to read the backup back.
func ValidateEncryption(e *ferry.Encryption, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range e.Recipients {
		if _, err := store.ParseRecipients([]string{r}); err != nil || strings.TrimSpace(r) == "" {
			errs = append(errs, field.Invalid(p.Child("recipients").Index(i), r, "not an age public key (age1...)"))
		}
	}
	ref := e.IdentityRef
	switch {
	case ref == nil && len(e.Recipients) > 0:
		errs = append(errs, field.Required(p.Child("identityRef"), "the Credential key holding an age identity for one of the recipients, to read the backup back for the restore"))
	case ref != nil:
		errs = append(errs, ValidateReference(ref.Name, "Credential", p.Child("identityRef", "name"))...)
		if ref.Key == "" {
			errs = append(errs, field.Required(p.Child("identityRef", "key"), "the key of the Credential's data that holds the identity"))
			break
		}
		for _, msg := range validation.IsConfigMapKey(ref.Key) {
			errs = append(errs, field.Invalid(p.Child("identityRef", "key"), ref.Key, msg))
		}
	}
	return errs
}
