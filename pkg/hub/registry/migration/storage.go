package migration

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/registry"
)

// NewREST returns the storage of Migrations and of their status
// subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*genericregistry.Store, *registry.StatusREST, error) {
	s, status := newStrategies(scheme)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &ferry.Migration{} },
		NewListFunc:               func() runtime.Object { return &ferry.MigrationList{} },
		DefaultQualifiedResource:  ferry.Resource("migrations"),
		SingularQualifiedResource: ferry.Resource("migration"),
		CreateStrategy:            s,
		UpdateStrategy:            s,
		DeleteStrategy:            s,
		ResetFieldsStrategy:       s,
		TableConvertor:            table,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, nil, err
	}
	return store, registry.NewStatusREST(store, status), nil
}

// table is `kubectl get migrations`.
var table = registry.Table{Columns: []registry.Column{
	{Definition: metav1.TableColumnDefinition{Name: "Source", Type: "string", Description: "spec.source.cluster"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Migration).Spec.Source.Cluster }},
	{Definition: metav1.TableColumnDefinition{Name: "Target", Type: "string", Description: "spec.target.cluster"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Migration).Spec.Target.Cluster }},
	{Definition: metav1.TableColumnDefinition{Name: "Phase", Type: "string", Description: "status.phase"},
		Cell: func(o runtime.Object) any { return string(o.(*ferry.Migration).Status.Phase) }},
	{Definition: metav1.TableColumnDefinition{Name: "Restored", Type: "integer", Description: "status.counts.restored"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Migration).Status.Counts.Restored }},
	{Definition: metav1.TableColumnDefinition{Name: "Failed", Type: "integer", Description: "status.counts.failed"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Migration).Status.Counts.Failed }},
}}
