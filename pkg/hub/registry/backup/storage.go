// Package backup is the hub's storage of Backups: their validation (the
// Cluster and BackupStorageLocation they name must exist, the selection
// must parse) and their table. ValidateSpec is shared with Schedules'
// templates.
package backup

import (
	"context"

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
	"github.com/kubeferry/ferry/pkg/storesync"
)

// NewREST returns the storage of Backups and of their status subresource.
// Whether the Cluster and location named exist is admission's to check
// (pkg/hub/admission).
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*genericregistry.Store, *registry.StatusREST, error) {
	k := registry.Kind[*ferry.Backup, ferry.BackupSpec, ferry.BackupStatus]{
		Resource: "backups", Singular: "backup",
		New:     func() runtime.Object { return &ferry.Backup{} },
		NewList: func() runtime.Object { return &ferry.BackupList{} },
		Spec:    func(b *ferry.Backup) *ferry.BackupSpec { return &b.Spec },
		Status:  func(b *ferry.Backup) *ferry.BackupStatus { return &b.Status },
		Start:   func(*ferry.Backup) ferry.BackupStatus { return ferry.BackupStatus{Phase: ferry.RunNew} },
		// Deleting a Backup deletes its data, as its TTL does.
		Finalizers: []string{ferry.BackupDataFinalizer},
		Validate:   func(_ context.Context, b *ferry.Backup) field.ErrorList { return Validate(b) },
		ValidateUpdate: func(_ context.Context, b, old *ferry.Backup) field.ErrorList {
			errs := Validate(b)
			return append(errs, registry.ValidateImmutable(&b.Spec, &old.Spec, field.NewPath("spec"), "a Backup runs once and its status and stored data describe the spec it ran; create another Backup")...)
		},
		ValidateStatus: func(b *ferry.Backup) field.ErrorList { return ValidateStatus(&b.Status) },
		Table:          table,
	}
	return k.NewREST(scheme, optsGetter)
}

// Validate checks a Backup's metadata and spec, but for whether what it
// names exists (References).
func Validate(b *ferry.Backup) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&b.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if err := store.ValidateBackupName(b.Name); err != nil && b.Name != "" {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), b.Name, err.Error()))
	}
	p := field.NewPath("spec")
	if b.Labels[storesync.LabelSyncedFrom] == "" || b.Spec.Cluster != "" {
		// One store sync made from a backup in its location, which any
		// front end may have taken, names no Cluster: it is never run.
		errs = append(errs, registry.ValidateReference(b.Spec.Cluster, "Cluster", p.Child("cluster"))...)
	}
	return append(errs, validateSpec(&b.Spec, p)...)
}

// ValidateSpec checks a Backup's spec (or a Schedule's template, at p).
func ValidateSpec(s *ferry.BackupSpec, p *field.Path) field.ErrorList {
	return append(registry.ValidateReference(s.Cluster, "Cluster", p.Child("cluster")), validateSpec(s, p)...)
}

// validateSpec checks a Backup's spec but for its Cluster.
func validateSpec(s *ferry.BackupSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.StorageLocationName != "" {
		errs = append(errs, registry.ValidateReference(s.StorageLocationName, "BackupStorageLocation", p.Child("storageLocationName"))...)
	}
	errs = append(errs, registry.ValidateSelection(s.IncludedNamespaces, s.ExcludedNamespaces, s.LabelSelector, s.IncludeClusterResources, s.TTL, p)...)
	return append(errs, registry.ValidateImages(s.Images, s.ImageRegistryMappings, p.Child("images"), p.Child("imageRegistryMappings"))...)
}

// ValidateStatus checks a status update.
func ValidateStatus(s *ferry.BackupStatus) field.ErrorList {
	p := field.NewPath("status")
	errs := registry.ValidatePhase(s.Phase, p.Child("phase"))
	errs = append(errs, metav1validation.ValidateConditions(s.Conditions, p.Child("conditions"))...)
	return append(errs, registry.ValidateNonNegative(p, map[string]int64{
		"progress.totalItems": s.Progress.TotalItems, "progress.itemsBackedUp": s.Progress.ItemsBackedUp,
		"warnings": s.Warnings, "errors": s.Errors})...)
}

// table is `kubectl get backups`.
var table = registry.Table{Columns: []registry.Column{
	{Definition: metav1.TableColumnDefinition{Name: "Cluster", Type: "string", Description: "spec.cluster"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Backup).Spec.Cluster }},
	{Definition: metav1.TableColumnDefinition{Name: "Phase", Type: "string", Description: "status.phase"},
		Cell: func(o runtime.Object) any { return string(o.(*ferry.Backup).Status.Phase) }},
	{Definition: metav1.TableColumnDefinition{Name: "Items", Type: "integer", Description: "status.progress.itemsBackedUp"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Backup).Status.Progress.ItemsBackedUp }},
	{Definition: metav1.TableColumnDefinition{Name: "Errors", Type: "integer", Description: "status.errors"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Backup).Status.Errors }},
	{Definition: metav1.TableColumnDefinition{Name: "Location", Type: "string", Description: "spec.storageLocationName"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Backup).Spec.StorageLocationName }},
	{Definition: metav1.TableColumnDefinition{Name: "Expires", Type: "string", Description: "time until status.expiration"},
		Cell: func(o runtime.Object) any { return registry.Until(o.(*ferry.Backup).Status.Expiration) }},
}}
