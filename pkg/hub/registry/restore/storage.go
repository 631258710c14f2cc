// Package restore is the hub's storage of Restores: their validation (the
// Cluster and Backup they name must exist, the mappings must be valid)
// and their table.
package restore

import (
	"context"
	"slices"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/registry"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/transform"
)

// NewREST returns the storage of Restores and of their status subresource.
// Whether the Cluster and Backup named exist is admission's to check
// (pkg/hub/admission).
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*genericregistry.Store, *registry.StatusREST, error) {
	k := registry.Kind[*ferry.Restore, ferry.RestoreSpec, ferry.RestoreStatus]{
		Resource: "restores", Singular: "restore",
		New:      func() runtime.Object { return &ferry.Restore{} },
		NewList:  func() runtime.Object { return &ferry.RestoreList{} },
		Spec:     func(r *ferry.Restore) *ferry.RestoreSpec { return &r.Spec },
		Status:   func(r *ferry.Restore) *ferry.RestoreStatus { return &r.Status },
		Start:    func(*ferry.Restore) ferry.RestoreStatus { return ferry.RestoreStatus{Phase: ferry.RunNew} },
		Validate: func(_ context.Context, r *ferry.Restore) field.ErrorList { return Validate(r) },
		ValidateUpdate: func(_ context.Context, r, old *ferry.Restore) field.ErrorList {
			return append(Validate(r), registry.ValidateImmutable(&r.Spec, &old.Spec, field.NewPath("spec"), "a Restore runs once and its status describes the spec it ran; create another Restore")...)
		},
		ValidateStatus: func(r *ferry.Restore) field.ErrorList { return ValidateStatus(&r.Status) },
		Table:          table,
	}
	return k.NewREST(scheme, optsGetter)
}

// Validate checks a Restore's metadata and spec, but for whether what it
// names exists.
func Validate(r *ferry.Restore) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&r.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if err := store.ValidateRestoreName(r.Name); err != nil && r.Name != "" {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), r.Name, err.Error()))
	}
	s, p := &r.Spec, field.NewPath("spec")
	errs = append(errs, registry.ValidateReference(s.Cluster, "Cluster", p.Child("cluster"))...)
	errs = append(errs, registry.ValidateReference(s.BackupName, "Backup", p.Child("backupName"))...)
	errs = append(errs, registry.ValidateGlobs(s.IncludedNamespaces, p.Child("includedNamespaces"))...)
	errs = append(errs, registry.ValidateGlobs(s.ExcludedNamespaces, p.Child("excludedNamespaces"))...)
	errs = append(errs, registry.ValidateMappings(s.NamespaceMapping, s.StorageClassMapping, s.ExistingResourcePolicy, p)...)
	clouds := transform.CloudNames()
	for _, c := range []struct {
		name string
		path *field.Path
	}{{s.FromCloud, p.Child("fromCloud")}, {s.ToCloud, p.Child("toCloud")}} {
		if c.name != "" && !slices.Contains(clouds, c.name) {
			errs = append(errs, field.NotSupported(c.path, c.name, clouds))
		}
	}
	if s.PushImages && len(s.ImageRegistryMappings) == 0 {
		errs = append(errs, field.Required(p.Child("imageRegistryMappings"), "spec.pushImages needs the registries to push to (OLD=NEW)"))
	}
	return errs
}

// ValidateStatus checks a status update.
func ValidateStatus(s *ferry.RestoreStatus) field.ErrorList {
	p := field.NewPath("status")
	errs := registry.ValidatePhase(s.Phase, p.Child("phase"))
	errs = append(errs, metav1validation.ValidateConditions(s.Conditions, p.Child("conditions"))...)
	c := s.Counts
	return append(errs, registry.ValidateNonNegative(p, map[string]int64{
		"counts.created": c.Created, "counts.updated": c.Updated, "counts.unchanged": c.Unchanged,
		"counts.skipped": c.Skipped, "counts.failed": c.Failed, "warnings": s.Warnings, "errors": s.Errors})...)
}

// table is `kubectl get restores`.
var table = registry.Table{Columns: []registry.Column{
	{Definition: metav1.TableColumnDefinition{Name: "Backup", Type: "string", Description: "spec.backupName"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Restore).Spec.BackupName }},
	{Definition: metav1.TableColumnDefinition{Name: "Cluster", Type: "string", Description: "spec.cluster"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Restore).Spec.Cluster }},
	{Definition: metav1.TableColumnDefinition{Name: "Phase", Type: "string", Description: "status.phase"},
		Cell: func(o runtime.Object) any { return string(o.(*ferry.Restore).Status.Phase) }},
	{Definition: metav1.TableColumnDefinition{Name: "Created", Type: "integer", Description: "status.counts.created"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Restore).Status.Counts.Created }},
	{Definition: metav1.TableColumnDefinition{Name: "Failed", Type: "integer", Description: "status.counts.failed"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Restore).Status.Counts.Failed }},
}}
