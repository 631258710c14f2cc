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

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/retention"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/storesync"
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

// expire deletes an ended Backup whose status.expiration passed, with
// pkg/retention as server mode and the CLI do: its folder in the location
// (when it is this Backup's, by UID), the volume snapshots no backup in
// the location uses any more (also when the folder was deleted out of
// band), and then the hub object. Before then it is looked at again at
// its expiration.
func (r *BackupReconciler) expire(ctx context.Context, b *v1beta1.Backup) (reconcile.Result, error) {
	exp := b.Status.Expiration
	if exp == nil {
		return reconcile.Result{}, nil
	}
	if due, wait := retention.Due(exp.Time, time.Now(), 0); !due {
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

// deleteStored deletes b's folder in the location url, if it is b's, and
// prunes the volume snapshots.
func (r *BackupReconciler) deleteStored(ctx context.Context, b *v1beta1.Backup, url string) error {
	loc, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer loc.Close()
	res, err := retention.Delete(ctx, loc, retention.Request{Name: b.Name,
		Owns:          func(stored *v1alpha1.Backup) bool { return storesync.Owns(b.UID, b.Labels, b.Annotations, stored) },
		HadVolumeData: b.Status.PodVolumes != nil && b.Status.PodVolumes.Completed > 0,
		Repository: func(ctx context.Context) (*volumes.Repository, error) {
			if r.Volumes.Password == "" {
				return nil, errNoPassword
			}
			return volumes.Open(ctx, loc, r.Volumes.Password, volumes.OpenOptions{Log: r.Log})
		}})
	switch {
	case err != nil:
		return err
	case res.Folder == retention.FolderKeptOther:
		r.Log.Warn("expired backup: the store folder of that name holds another backup, and is kept", "backup", b.Name, "storeUID", res.Stored.UID)
	case res.VolumeError != nil:
		r.Log.Warn("expired backup: volume snapshots not deleted", "backup", b.Name, "error", res.VolumeError)
	case res.Snapshots > 0:
		r.Log.Info("expired backup: volume snapshots deleted", "backup", b.Name, "snapshots", res.Snapshots)
	}
	return nil
}
