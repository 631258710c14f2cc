package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

func isConflict(err error) bool { return apierrors.IsConflict(err) }

// runLeased runs work under key's lease, renewing it (with apply, the
// progress so far) every third of its duration; when the lease is lost,
// work's context is cancelled and the error is errLeaseLost.
func runLeased[T client.Object, R any](ctx context.Context, k leased[T], key types.NamespacedName, apply func(T), work func(context.Context) (R, error)) (R, error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.renew(runCtx, key, apply, func() { cancel(errLeaseLost) })
	}()
	res, err := work(runCtx)
	lost := errors.Is(context.Cause(runCtx), errLeaseLost)
	cancel(nil)
	wg.Wait()
	if lost {
		return res, errLeaseLost
	}
	return res, err
}

// connectRef reaches the Cluster name of namespace through its
// ClusterCredential's kubeconfig, within timeout. Errors name the field
// (path), and an unreachable cluster has reason unreachable.
func connectRef(ctx context.Context, reader client.Reader, timeout time.Duration, namespace, name, path, unreachable string) (*kube.Cluster, *v1beta1.Cluster, error) {
	var c v1beta1.Cluster
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fail("ClusterNotFound", "%s: Cluster %q not found in namespace %s", path, name, namespace)
		}
		return nil, nil, err
	}
	cl, err := connectCluster(ctx, reader, &c, timeout)
	var f *failure
	switch {
	case errors.As(err, &f) && f.reason == reasonUnreachable:
		return nil, nil, fail(unreachable, "%s: %w", path, f.err)
	case errors.As(err, &f):
		return nil, nil, fail(f.reason, "%s: %w", path, f.err)
	}
	return cl, &c, err
}

// resolveLocation is the BackupStorageLocation name of namespace, or the
// namespace's default when name is empty.
func resolveLocation(ctx context.Context, reader client.Reader, namespace, name string) (*v1beta1.BackupStorageLocation, error) {
	if name != "" {
		var l v1beta1.BackupStorageLocation
		if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &l); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fail("LocationNotFound", "spec.storageLocationName: BackupStorageLocation %q not found in namespace %s", name, namespace)
			}
			return nil, err
		}
		return &l, nil
	}
	var list v1beta1.BackupStorageLocationList
	if err := reader.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var def []*v1beta1.BackupStorageLocation
	for i := range list.Items {
		if list.Items[i].Spec.Default {
			def = append(def, &list.Items[i])
		}
	}
	switch len(def) {
	case 0:
		return nil, fail("LocationNotFound", "spec.storageLocationName is empty, and namespace %s has no default BackupStorageLocation (spec.default: true)", namespace)
	case 1:
		return def[0], nil
	}
	return nil, fail("LocationNotFound", "spec.storageLocationName is empty, and namespace %s has %d default BackupStorageLocations (%s, %s): name one", namespace, len(def), def[0].Name, def[1].Name)
}

// expire deletes an ended Backup whose status.expiration passed: its
// folder in the location (when it is this Backup's, by UID), the volume
// snapshots no backup in the location uses any more, and then the hub
// object. Before then it is looked at again at its expiration.
func (r *BackupReconciler) expire(ctx context.Context, b *v1beta1.Backup) (reconcile.Result, error) {
	exp := b.Status.Expiration
	if exp == nil {
		return reconcile.Result{}, nil
	}
	if wait := time.Until(exp.Time); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if url := b.Status.StorageLocation; url != "" {
		if err := r.deleteStored(ctx, b, url); err != nil {
			return reconcile.Result{}, fmt.Errorf("expired backup %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	r.Log.Info("expired backup deleted", "backup", b.Namespace+"/"+b.Name, "expired", exp.UTC().Format(time.RFC3339))
	uid := b.UID
	return reconcile.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, b, client.Preconditions{UID: &uid}))
}

// deleteStored deletes b's folder in the location url, if it is b's.
func (r *BackupReconciler) deleteStored(ctx context.Context, b *v1beta1.Backup, url string) error {
	loc, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer loc.Close()
	stored, err := loc.GetBackup(ctx, b.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil && !errors.Is(err, store.ErrIncomplete):
		return err
	case stored != nil && stored.UID != "" && stored.UID != b.UID:
		r.Log.Warn("expired backup: the store folder of that name holds another backup, and is kept", "backup", b.Name, "storeUID", stored.UID)
		return nil
	}
	hasVolumes, err := loc.Exists(ctx, store.BackupVolumesKey(b.Name))
	if err != nil {
		return err
	}
	if err := loc.DeleteBackup(ctx, b.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if hasVolumes || b.Status.PodVolumes != nil && b.Status.PodVolumes.Completed > 0 {
		r.pruneVolumes(ctx, loc, b)
	}
	return nil
}

// pruneVolumes deletes the kopia snapshots of backups no longer in loc;
// a failure is logged, and the next delete prunes what this one left.
func (r *BackupReconciler) pruneVolumes(ctx context.Context, loc *store.Location, b *v1beta1.Backup) {
	if r.Volumes.Password == "" {
		r.Log.Warn("expired backup: its pod volume snapshots are kept: the hub has no volume repository password", "backup", b.Name)
		return
	}
	repo, err := volumes.Open(ctx, loc, r.Volumes.Password, volumes.OpenOptions{Log: r.Log})
	if err == nil {
		defer repo.Close(context.WithoutCancel(ctx))
		var n int
		if n, err = repo.PruneDeletedBackups(ctx, loc); err == nil {
			r.Log.Info("expired backup: volume snapshots deleted", "backup", b.Name, "snapshots", n)
			return
		}
	}
	r.Log.Warn("expired backup: volume snapshots not deleted", "backup", b.Name, "error", err)
}
