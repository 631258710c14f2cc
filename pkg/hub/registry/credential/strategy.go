// Package credential is the hub's storage of Credentials (a backup
// storage location's credentials or an age identity, encrypted at rest by
// the hub's storage configuration): their strategy, validation and table.
package credential

import (
	"context"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/registry"
)

type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	registry.Basics
}

func (strategy) NamespaceScoped() bool                                            { return true }
func (strategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (strategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return ValidateCredential(obj.(*ferry.Credential))
}

func (strategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return ValidateCredential(obj.(*ferry.Credential))
}

// MaxSize bounds a Credential's data, as a Secret's is bounded (1 MiB).
const MaxSize = 1 << 20

// ValidateCredential checks the metadata, and that data has at least one
// key, each a valid Secret key, within MaxSize in all. Values are never
// quoted in an error.
func ValidateCredential(c *ferry.Credential) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&c.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, registry.ValidateNoFinalizers(&c.ObjectMeta)...)
	p := field.NewPath("data")
	if len(c.Data) == 0 {
		return append(errs, field.Required(p, "the credentials, a key each"))
	}
	size := 0
	for k, v := range c.Data {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		size += len(v)
	}
	if size > MaxSize {
		errs = append(errs, field.TooLong(p, "<bytes>", MaxSize))
	}
	return errs
}
