// Package cluster is the hub's storage of Clusters (member clusters): their
// create, update and status strategies, validation and table.
package cluster

import (
	"context"
	"path"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/registry"
)

var versions = []string{"ferry.dev/v1alpha1", "ferry.dev/v1beta1"}

// strategy creates and updates a Cluster's spec; its status stays.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	registry.Basics
}

// statusStrategy updates a Cluster's status; its spec stays.
type statusStrategy struct{ strategy }

func (strategy) NamespaceScoped() bool { return true }

// PrepareForCreate clears the status (the hub's controllers write it).
func (strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	c := obj.(*ferry.Cluster)
	c.Status = ferry.ClusterStatus{}
	c.Generation = 1
}

// PrepareForUpdate keeps the status, and counts a changed spec in the generation.
func (strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, o := obj.(*ferry.Cluster), old.(*ferry.Cluster)
	c.Status = o.Status
	if !apiequality.Semantic.DeepEqual(c.Spec, o.Spec) {
		c.Generation = o.Generation + 1
	}
}

func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return ValidateCluster(obj.(*ferry.Cluster))
}

func (strategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return ValidateCluster(obj.(*ferry.Cluster))
}

// ValidateCluster checks a Cluster's metadata and spec.
func ValidateCluster(c *ferry.Cluster) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&c.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	p := field.NewPath("spec", "credentialRef", "name")
	if c.Spec.CredentialRef.Name == "" {
		errs = append(errs, field.Required(p, "the name of the ClusterCredential holding the cluster's kubeconfig"))
	}
	for _, msg := range apivalidation.NameIsDNSSubdomain(c.Spec.CredentialRef.Name, false) {
		if c.Spec.CredentialRef.Name != "" {
			errs = append(errs, field.Invalid(p, c.Spec.CredentialRef.Name, msg))
		}
	}
	if d := c.Spec.NodePodsDir; d != "" && (!path.IsAbs(d) || path.Clean(d) != d) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "nodePodsDir"), d, "must be a clean absolute path, such as /var/lib/kubelet/pods"))
	}
	return errs
}

// GetResetFields: the main strategy never writes the status.
func (strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields(versions, "status")
}

// PrepareForUpdate keeps the spec, labels and annotations as they were.
func (statusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, o := obj.(*ferry.Cluster), old.(*ferry.Cluster)
	c.Spec = o.Spec
	c.Labels = o.Labels
	c.Annotations = o.Annotations
}

// ValidateUpdate checks the status's conditions.
func (statusStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return metav1validation.ValidateConditions(obj.(*ferry.Cluster).Status.Conditions, field.NewPath("status", "conditions"))
}

// GetResetFields: the status strategy never writes the spec.
func (statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields(versions, "spec")
}
