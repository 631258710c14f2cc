package registry

import (
	"context"
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
)

// Versions are the hub's served versions, for the reset fields.
var Versions = []string{"ferry.dev/v1alpha1", "ferry.dev/v1beta1"}

// Kind describes a namespaced kind T with a spec S and a status St to the
// hub's shared strategies: a create starts the status afresh (Start), an
// update keeps the status and counts a changed spec in the generation, and
// a status update keeps the spec, labels and annotations.
type Kind[T runtime.Object, S, St any] struct {
	// Resource is the plural resource, Singular the singular.
	Resource, Singular string
	New, NewList       func() runtime.Object
	Spec               func(T) *S
	Status             func(T) *St
	// Start, if set, is the status of a new object; default empty.
	Start func(T) St
	// Finalizers are added to every new object (the controllers remove
	// them once what the object owns outside the hub is gone).
	Finalizers []string
	// Validate checks a new or changed object; ValidateUpdate, if set,
	// checks a changed one instead (given the old).
	Validate       func(ctx context.Context, obj T) field.ErrorList
	ValidateUpdate func(ctx context.Context, obj, old T) field.ErrorList
	// ValidateStatus, if set, checks a status update.
	ValidateStatus func(obj T) field.ErrorList
	Table          Table
}

// NewREST returns the storage of the kind and of its status subresource.
func (k Kind[T, S, St]) NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*genericregistry.Store, *StatusREST, error) {
	s := kindStrategy[T, S, St]{ObjectTyper: scheme, NameGenerator: names.SimpleNameGenerator, k: k}
	store := &genericregistry.Store{
		NewFunc:                   k.New,
		NewListFunc:               k.NewList,
		DefaultQualifiedResource:  ferry.Resource(k.Resource),
		SingularQualifiedResource: ferry.Resource(k.Singular),
		CreateStrategy:            s,
		UpdateStrategy:            s,
		DeleteStrategy:            s,
		ResetFieldsStrategy:       s,
		TableConvertor:            k.Table,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, nil, err
	}
	return store, NewStatusREST(store, kindStatusStrategy[T, S, St]{s}), nil
}

// kindStrategy creates and updates a Kind's spec; its status stays.
type kindStrategy[T runtime.Object, S, St any] struct {
	runtime.ObjectTyper
	names.NameGenerator
	Basics
	k Kind[T, S, St]
}

// kindStatusStrategy updates a Kind's status; its spec stays.
type kindStatusStrategy[T runtime.Object, S, St any] struct {
	kindStrategy[T, S, St]
}

func (kindStrategy[T, S, St]) NamespaceScoped() bool { return true }

// PrepareForCreate starts the status, at generation 1.
func (s kindStrategy[T, S, St]) PrepareForCreate(_ context.Context, obj runtime.Object) {
	o := obj.(T)
	var st St
	if s.k.Start != nil {
		st = s.k.Start(o)
	}
	*s.k.Status(o) = st
	if m, err := meta.Accessor(obj); err == nil {
		m.SetGeneration(1)
		for _, f := range s.k.Finalizers {
			if !slices.Contains(m.GetFinalizers(), f) {
				m.SetFinalizers(append(m.GetFinalizers(), f))
			}
		}
	}
}

// PrepareForUpdate keeps the status, and counts a changed spec in the
// generation.
func (s kindStrategy[T, S, St]) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	o, was := obj.(T), old.(T)
	*s.k.Status(o) = *s.k.Status(was)
	m, err1 := meta.Accessor(obj)
	w, err2 := meta.Accessor(old)
	if err1 == nil && err2 == nil {
		m.SetGeneration(w.GetGeneration())
		if !apiequality.Semantic.DeepEqual(*s.k.Spec(o), *s.k.Spec(was)) {
			m.SetGeneration(w.GetGeneration() + 1)
		}
	}
}

func (s kindStrategy[T, S, St]) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return s.k.Validate(ctx, obj.(T))
}

func (s kindStrategy[T, S, St]) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if s.k.ValidateUpdate != nil {
		return s.k.ValidateUpdate(ctx, obj.(T), old.(T))
	}
	return s.k.Validate(ctx, obj.(T))
}

// GetResetFields: the main strategy never writes the status.
func (kindStrategy[T, S, St]) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return ResetFields(Versions, "status")
}

// PrepareForUpdate keeps the spec, labels and annotations as they were.
func (s kindStatusStrategy[T, S, St]) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	*s.k.Spec(obj.(T)) = *s.k.Spec(old.(T))
	m, err1 := meta.Accessor(obj)
	w, err2 := meta.Accessor(old)
	if err1 == nil && err2 == nil {
		m.SetLabels(w.GetLabels())
		m.SetAnnotations(w.GetAnnotations())
	}
}

// ValidateUpdate checks the status only.
func (s kindStatusStrategy[T, S, St]) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	if s.k.ValidateStatus == nil {
		return nil
	}
	return s.k.ValidateStatus(obj.(T))
}

// GetResetFields: the status strategy never writes the spec.
func (kindStatusStrategy[T, S, St]) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return ResetFields(Versions, "spec")
}
