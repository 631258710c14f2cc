// Package migration is the hub's storage of Migrations: their create,
// update and status strategies (defaulting, validation with field paths;
// whether the Clusters named exist is admission's to check,
// pkg/hub/admission), their report and their table.
package migration

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/registry"
)

// versions are the served versions, for the reset fields.
var versions = []string{"ferry.dev/v1alpha1", "ferry.dev/v1beta1"}

// strategy creates and updates a Migration's spec; its status stays.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	registry.Basics
}

// statusStrategy updates a Migration's status; its spec stays.
type statusStrategy struct {
	strategy
}

// newStrategies returns the main and status strategies.
func newStrategies(typer runtime.ObjectTyper) (strategy, statusStrategy) {
	s := strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator}
	return s, statusStrategy{s}
}

func (strategy) NamespaceScoped() bool { return true }

// PrepareForCreate starts the status at Pending, at generation 1.
func (strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	m := obj.(*ferry.Migration)
	m.Status = ferry.MigrationStatus{Phase: ferry.PhasePending}
	m.Generation = 1
}

// PrepareForUpdate keeps the status, and counts a changed spec in the
// generation.
func (strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	m, o := obj.(*ferry.Migration), old.(*ferry.Migration)
	m.Status = o.Status
	if !apiequality.Semantic.DeepEqual(m.Spec, o.Spec) {
		m.Generation = o.Generation + 1
	}
}

// Validate checks a new Migration.
func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return ValidateMigration(obj.(*ferry.Migration))
}

// ValidateUpdate checks a changed Migration (a staged one's spec is fixed
// but for spec.staged).
func (strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	m, was := obj.(*ferry.Migration), old.(*ferry.Migration)
	errs := ValidateMigration(m)
	return append(errs, ValidateMigrationUpdate(&m.Spec, &was.Spec, field.NewPath("spec"))...)
}

// GetResetFields: the main strategy never writes the status.
func (strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields(versions, "status")
}

// PrepareForUpdate keeps the spec, the labels and annotations as they were.
func (statusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	m, o := obj.(*ferry.Migration), old.(*ferry.Migration)
	m.Spec = o.Spec
	m.Labels = o.Labels
	m.Annotations = o.Annotations
}

// ValidateUpdate checks the status only.
func (statusStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return ValidateMigrationStatus(&obj.(*ferry.Migration).Status, field.NewPath("status"))
}

// GetResetFields: the status strategy never writes the spec.
func (statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields(versions, "spec")
}
