package backupstoragelocation

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/keymutex"
)

// Storage is the storage of BackupStorageLocations: creates and updates
// in one namespace run one at a time, so that the check that there is no
// other default (by the admission plugin, pkg/hub/admission, which lists
// the namespace's locations as stored, inside Create and Update) and the
// write are one step. Of two concurrent creates of a
// default location, exactly one is accepted. The lock is the process's:
// hubs sharing one etcd each hold their own (docs/design.md#the-hub).
type Storage struct {
	*genericregistry.Store
	namespaces keymutex.KeyMutex
}

var (
	_ rest.Creater              = &Storage{}
	_ rest.Updater              = &Storage{}
	_ rest.ShortNamesProvider   = &Storage{}
	_ rest.StandardStorage      = &Storage{}
	_ rest.SingularNameProvider = &Storage{}
)

// ShortNames are server mode's CRD's: bsl.
func (s *Storage) ShortNames() []string { return []string{"bsl"} }

func (s *Storage) lock(ctx context.Context) func() {
	ns := genericapirequest.NamespaceValue(ctx)
	s.namespaces.LockKey(ns)
	return func() { _ = s.namespaces.UnlockKey(ns) }
}

// Create creates a location under its namespace's lock.
func (s *Storage) Create(ctx context.Context, obj runtime.Object, validate rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	defer s.lock(ctx)()
	return s.Store.Create(ctx, obj, validate, opts)
}

// Update updates a location under its namespace's lock.
func (s *Storage) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	defer s.lock(ctx)()
	return s.Store.Update(ctx, name, objInfo, createValidation, updateValidation, forceAllowCreate, opts)
}
