// Package clustercredential is the hub's storage of ClusterCredentials (a
// member cluster's kubeconfig, encrypted at rest by the hub's storage
// configuration): their strategy, validation and table.
package clustercredential

import (
	"context"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/tools/clientcmd"

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
	return ValidateClusterCredential(obj.(*ferry.ClusterCredential))
}

func (strategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return ValidateClusterCredential(obj.(*ferry.ClusterCredential))
}

// ValidateClusterCredential checks the metadata, and that kubeconfig is a
// kubeconfig file. The bytes are never quoted in an error.
func ValidateClusterCredential(c *ferry.ClusterCredential) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&c.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, registry.ValidateNoFinalizers(&c.ObjectMeta)...)
	p := field.NewPath("kubeconfig")
	if len(c.Kubeconfig) == 0 {
		return append(errs, field.Required(p, "the member cluster's kubeconfig file"))
	}
	cfg, err := clientcmd.Load(c.Kubeconfig)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(p, "<bytes>", "not a kubeconfig file"))
	case len(cfg.Contexts) == 0:
		errs = append(errs, field.Invalid(p, "<bytes>", "the kubeconfig has no context"))
	}
	return errs
}
