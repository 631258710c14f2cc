package backupstoragelocation

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// write are one step. Of two concurrent creates of a default location,
// exactly one is accepted: within the process by a lock per namespace,
// and across the hubs that share one etcd by an etcd lock per namespace
// (Locker).
type Storage struct {
	*genericregistry.Store
	namespaces keymutex.KeyMutex
	shared     Locker
}

// Locker holds a lock per namespace across processes.
type Locker interface {
	// Lock takes namespace's lock, waiting until ctx ends; unlock gives
	// it back.
	Lock(ctx context.Context, namespace string) (unlock func(), err error)
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

// lockTimeout bounds the wait for a namespace's lock.
const lockTimeout = 30 * time.Second

func (s *Storage) lock(ctx context.Context) (func(), error) {
	ns := genericapirequest.NamespaceValue(ctx)
	s.namespaces.LockKey(ns)
	if s.shared == nil {
		return func() { _ = s.namespaces.UnlockKey(ns) }, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lockTimeout)
	defer cancel()
	unlock, err := s.shared.Lock(ctx, ns)
	if err != nil {
		_ = s.namespaces.UnlockKey(ns)
		return nil, apierrors.NewInternalError(fmt.Errorf("taking the lock of namespace %s's BackupStorageLocations in etcd: %w", ns, err))
	}
	return func() { unlock(); _ = s.namespaces.UnlockKey(ns) }, nil
}

// Create creates a location under its namespace's lock.
func (s *Storage) Create(ctx context.Context, obj runtime.Object, validate rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.Store.Create(ctx, obj, validate, opts)
}

// Update updates a location under its namespace's lock.
func (s *Storage) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	return s.Store.Update(ctx, name, objInfo, createValidation, updateValidation, forceAllowCreate, opts)
}

// EtcdLocker is a Locker of etcd's (concurrency.Mutex under Prefix), held
// with a lease of sessionTTL seconds: a hub that dies holding it lets it
// go then. Each Lock connects to Endpoints and the unlock disconnects:
// locations are written seldom, and a standing client costs the idle hub
// about 8 MiB (bench/hub).
type EtcdLocker struct {
	Endpoints []string
	Prefix    string
}

const sessionTTL = 10

// Lock takes the lock of namespace.
func (l EtcdLocker) Lock(ctx context.Context, namespace string) (func(), error) {
	client, err := clientv3.New(clientv3.Config{Endpoints: l.Endpoints, DialTimeout: lockTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	session, err := concurrency.NewSession(client, concurrency.WithTTL(sessionTTL), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	m := concurrency.NewMutex(session, l.Prefix+namespace)
	if err := m.Lock(ctx); err != nil {
		_ = session.Close()
		_ = client.Close()
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Unlock(ctx)
		_ = session.Close() // revokes the lease
		_ = client.Close()
	}, nil
}
