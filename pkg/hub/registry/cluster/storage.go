package cluster

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/registry"
)

// NewREST returns the storage of Clusters and of their status subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*genericregistry.Store, *registry.StatusREST, error) {
	s := strategy{ObjectTyper: scheme, NameGenerator: names.SimpleNameGenerator}
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &ferry.Cluster{} },
		NewListFunc:               func() runtime.Object { return &ferry.ClusterList{} },
		DefaultQualifiedResource:  ferry.Resource("clusters"),
		SingularQualifiedResource: ferry.Resource("cluster"),
		CreateStrategy:            s,
		UpdateStrategy:            s,
		DeleteStrategy:            s,
		ResetFieldsStrategy:       s,
		TableConvertor:            table,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, nil, err
	}
	return store, registry.NewStatusREST(store, statusStrategy{s}), nil
}

// table is `kubectl get clusters`.
var table = registry.Table{Columns: []registry.Column{
	{Definition: metav1.TableColumnDefinition{Name: "Credential", Type: "string", Description: "spec.credentialRef.name"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Cluster).Spec.CredentialRef.Name }},
	{Definition: metav1.TableColumnDefinition{Name: "Reachable", Type: "string", Description: "the Reachable condition"},
		Cell: func(o runtime.Object) any {
			if c := meta.FindStatusCondition(o.(*ferry.Cluster).Status.Conditions, ferry.ClusterConditionReachable); c != nil {
				return string(c.Status)
			}
			return "Unknown"
		}},
	{Definition: metav1.TableColumnDefinition{Name: "Version", Type: "string", Description: "status.serverVersion"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Cluster).Status.ServerVersion }},
	{Definition: metav1.TableColumnDefinition{Name: "Checked", Type: "string", Description: "time since status.lastChecked"},
		Cell: func(o runtime.Object) any { return registry.Since(o.(*ferry.Cluster).Status.LastChecked) }},
}}
