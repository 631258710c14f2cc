// Package backupstoragelocation is the hub's storage of
// BackupStorageLocations: their validation (a URL ferry can open), the
// lock that makes "at most one default per namespace" one step with the
// write, and their table.
package backupstoragelocation

import (
	"context"
	"net/url"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/utils/keymutex"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/registry"
	"github.com/kubeferry/ferry/pkg/store"
)

type location = ferry.BackupStorageLocation

// NewREST returns the storage of BackupStorageLocations and of their
// status subresource; shared, if not nil, locks a namespace's writes
// across the hubs that share one etcd.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, shared Locker) (*Storage, *registry.StatusREST, error) {
	k := registry.Kind[*location, ferry.BackupStorageLocationSpec, ferry.BackupStorageLocationStatus]{
		Resource: "backupstoragelocations", Singular: "backupstoragelocation",
		New:      func() runtime.Object { return &location{} },
		NewList:  func() runtime.Object { return &ferry.BackupStorageLocationList{} },
		Spec:     func(l *location) *ferry.BackupStorageLocationSpec { return &l.Spec },
		Status:   func(l *location) *ferry.BackupStorageLocationStatus { return &l.Status },
		Validate: func(_ context.Context, l *location) field.ErrorList { return Validate(l) },
		ValidateStatus: func(l *location) field.ErrorList {
			return metav1validation.ValidateConditions(l.Status.Conditions, field.NewPath("status", "conditions"))
		},
		Table: table,
	}
	store, status, err := k.NewREST(scheme, optsGetter)
	if err != nil {
		return nil, nil, err
	}
	return &Storage{Store: store, namespaces: keymutex.NewHashed(0), shared: shared}, status, nil
}

// Validate checks a BackupStorageLocation's metadata and spec.
func Validate(l *location) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&l.ObjectMeta, true, apivalidation.NameIsDNSLabel, field.NewPath("metadata"))
	p := field.NewPath("spec")
	errs = append(errs, registry.ValidateLocationURL(l.Spec.URL, p.Child("url"))...)
	if f := l.Spec.ValidationFrequency; f != nil && f.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("validationFrequency"), f.Duration.String(), "must not be negative (empty or 0: every minute)"))
	}
	if l.Spec.CredentialRef != nil {
		errs = append(errs, registry.ValidateReference(l.Spec.CredentialRef.Name, "Credential", p.Child("credentialRef", "name"))...)
		if u, err := url.Parse(l.Spec.URL); err == nil && u.Scheme != "" && len(store.CredentialKeys(u.Scheme)) == 0 {
			errs = append(errs, field.Invalid(p.Child("credentialRef"), l.Spec.CredentialRef.Name, "a "+u.Scheme+":// location takes no credentials"))
		}
	}
	if l.Spec.Encryption != nil {
		errs = append(errs, registry.ValidateEncryption(l.Spec.Encryption, p.Child("encryption"))...)
	}
	return errs
}

// table is `kubectl get backupstoragelocations`.
var table = registry.Table{Columns: []registry.Column{
	{Definition: metav1.TableColumnDefinition{Name: "Phase", Type: "string", Description: "status.phase"},
		Cell: func(o runtime.Object) any { return string(o.(*location).Status.Phase) }},
	{Definition: metav1.TableColumnDefinition{Name: "Default", Type: "boolean", Description: "spec.default"},
		Cell: func(o runtime.Object) any { return o.(*location).Spec.Default }},
	{Definition: metav1.TableColumnDefinition{Name: "URL", Type: "string", Description: "spec.url"},
		Cell: func(o runtime.Object) any { return o.(*location).Spec.URL }},
	{Definition: metav1.TableColumnDefinition{Name: "Validated", Type: "string", Description: "time since status.lastValidationTime"},
		Cell: func(o runtime.Object) any { return registry.Since(o.(*location).Status.LastValidationTime) }},
}}
