// Package registry holds what the hub's REST storages share: the status
// subresource's storage, the table of `kubectl get` columns, and the
// helpers the kinds' strategies use. Each kind's storage and strategy is in
// a package of its own below (cluster, clustercredential, migration).
package registry

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// StatusREST is the storage of a kind's status subresource: the kind's
// store with the status strategy, which keeps the spec as it was.
type StatusREST struct {
	store *genericregistry.Store
}

var _ = rest.Patcher(&StatusREST{})

// NewStatusREST returns the status storage of store, updated with strategy.
func NewStatusREST(store *genericregistry.Store, strategy interface {
	rest.RESTUpdateStrategy
	rest.ResetFieldsStrategy
}) *StatusREST {
	s := *store
	s.CreateStrategy = nil
	s.DeleteStrategy = nil
	s.UpdateStrategy = strategy
	s.ResetFieldsStrategy = strategy
	return &StatusREST{store: &s}
}

// New returns an empty object of the kind.
func (r *StatusREST) New() runtime.Object { return r.store.New() }

// Destroy does nothing: the main storage owns the store.
func (r *StatusREST) Destroy() {}

// Get returns the object, for patches of its status.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update writes the object's status only.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Subresources never create the object.
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields says which fields a status update leaves as they were.
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable is the main storage's table.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// ResetFields are the fields of versions a strategy resets: for the main
// strategy the status, for the status strategy the spec.
func ResetFields(versions []string, path string) map[fieldpath.APIVersion]*fieldpath.Set {
	out := make(map[fieldpath.APIVersion]*fieldpath.Set, len(versions))
	for _, v := range versions {
		out[fieldpath.APIVersion(v)] = fieldpath.NewSet(fieldpath.MakePathOrDie(path))
	}
	return out
}

// Column is one column of a kind's `kubectl get` table after Name: its
// definition and the cell of an object (of the kind, internal version).
type Column struct {
	Definition metav1.TableColumnDefinition
	Cell       func(obj runtime.Object) any
}

// Table converts a kind's objects to kubectl's table: Name, the columns,
// and Age.
type Table struct {
	Columns []Column
}

// ConvertToTable implements rest.TableConvertor.
func (t Table) ConvertToTable(_ context.Context, object runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "the object's name"},
	}}
	for _, c := range t.Columns {
		table.ColumnDefinitions = append(table.ColumnDefinitions, c.Definition)
	}
	table.ColumnDefinitions = append(table.ColumnDefinitions,
		metav1.TableColumnDefinition{Name: "Age", Type: "date", Description: "time since the object was created"})
	rows, err := metatable.MetaToTableRow(object, func(obj runtime.Object, m metav1.Object, name, age string) ([]any, error) {
		cells := []any{name}
		for _, c := range t.Columns {
			cells = append(cells, c.Cell(obj))
		}
		return append(cells, age), nil
	})
	if err != nil {
		return nil, err
	}
	table.Rows = rows
	if l, err := meta.ListAccessor(object); err == nil {
		table.ResourceVersion = l.GetResourceVersion()
		table.Continue = l.GetContinue()
		table.RemainingItemCount = l.GetRemainingItemCount()
	} else if o, err := meta.CommonAccessor(object); err == nil {
		table.ResourceVersion = o.GetResourceVersion()
	}
	return table, nil
}

// Since is the age of t as kubectl prints it ("5m"), or "<none>".
func Since(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "<none>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// Must panics with what failed when a storage cannot be built: the hub
// cannot serve without it, and it fails at startup only.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("building the hub's storage: %v", err))
	}
	return v
}

// Basics are the strategy methods every hub kind answers alike: no
// warnings, no create on update, updates without a resourceVersion
// allowed, nothing to canonicalize, and no garbage collection: the hub
// runs no garbage collector, so a delete with propagationPolicy Orphan or
// Foreground deletes at once instead of adding a finalizer nobody would
// remove (and answering with the object). Each kind's strategy embeds it.
type Basics struct{}

// DefaultGarbageCollectionPolicy: the hub collects no garbage.
func (Basics) DefaultGarbageCollectionPolicy(context.Context) rest.GarbageCollectionPolicy {
	return rest.Unsupported
}

// ValidateNoFinalizers refuses finalizers on a kind that holds secrets: a
// delete of an object with finalizers answers with the object, and
// nobody but the hub's controllers may read those.
func ValidateNoFinalizers(m *metav1.ObjectMeta) field.ErrorList {
	if len(m.Finalizers) == 0 {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"), "a kind that holds secrets takes no finalizers")}
}

func (Basics) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }
func (Basics) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}
func (Basics) AllowCreateOnUpdate(context.Context) bool      { return false }
func (Basics) AllowUnconditionalUpdate(context.Context) bool { return true }
func (Basics) Canonicalize(runtime.Object)                   {}

// Until is the time left until t as kubectl prints it ("5m"), "expired"
// once past, or "<none>".
func Until(t *metav1.Time) string {
	switch {
	case t == nil || t.IsZero():
		return "<none>"
	case time.Until(t.Time) <= 0:
		return "expired"
	}
	return duration.HumanDuration(time.Until(t.Time))
}
