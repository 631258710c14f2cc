package controller

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/events"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/metrics"
	"github.com/kubeferry/ferry/pkg/retention"
	"github.com/kubeferry/ferry/pkg/storagelocation"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/storesync"
)

// LocationReconciler checks each BackupStorageLocation when it or a
// Credential it names changes, and every spec.validationFrequency
// (default ValidationPeriod): the hub opens the store with the location's
// Credential, or its own credentials, and its encryption, and lists it
// (storagelocation.Check, as server mode does). The
// result is status.phase Available or Unavailable, status.message with
// pkg/store's reason (access denied, bucket not found, unreachable), and
// the condition Available. An Available location is then synced into the
// hub (sync): the backups any front end took into it appear as hub
// Backups, which hub Restores restore.
type LocationReconciler struct {
	Client client.Client
	Reader client.Reader
	Options
}

// Reconcile checks the location and records the result.
func (r *LocationReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var l v1beta1.BackupStorageLocation
	if err := r.Reader.Get(ctx, req.NamespacedName, &l); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if l.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	orig := l.DeepCopy()
	err := storagelocation.Check(ctx, r.ConnectTimeout, func(ctx context.Context) (*store.Location, error) {
		loc, _, err := locationAccess(&l, false).open(ctx, r.Reader, "LocationUnavailable")
		return loc, err
	})
	cond := storagelocation.Condition(err, l.Generation)
	if err == nil {
		l.Status.Phase, l.Status.Message = v1beta1.LocationAvailable, ""
	} else {
		l.Status.Phase, l.Status.Message = v1beta1.LocationUnavailable, err.Error()
		if orig.Status.Phase != v1beta1.LocationUnavailable {
			r.Log.Warn("backup storage location unavailable", "location", req.String(), "reason", err)
		}
	}
	metrics.LocationChecked(req.String(), err == nil)
	now := r.now()
	l.Status.LastValidationTime, l.Status.ObservedGeneration = &now, l.Generation
	meta.SetStatusCondition(&l.Status.Conditions, cond)
	if err := r.Client.Status().Patch(ctx, &l, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// An Event when the outcome changes: the phase, or why it is
	// unavailable.
	switch {
	case l.Status.Phase == orig.Status.Phase && l.Status.Message == orig.Status.Message:
	case err == nil:
		events.Record(r.Events, &l, false, events.Available, "Validate", "the store %s can be listed", store.Redact(l.Spec.URL))
	default:
		events.Record(r.Events, &l, true, events.Unavailable, "Validate", "%v", err)
	}
	if err == nil && l.Status.Phase == v1beta1.LocationAvailable {
		if err := r.sync(ctx, &l); err != nil {
			r.Log.Warn("store sync", "location", req.String(), "error", err)
		}
	}
	return reconcile.Result{RequeueAfter: storagelocation.NextCheck(l.Spec.ValidationFrequency, r.ValidationPeriod)}, nil
}

// locationsOf are the locations of o's namespace that use the Credential
// o (spec.credentialRef or spec.encryption.identityRef).
func (r *LocationReconciler) locationsOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1beta1.BackupStorageLocationList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, l := range list.Items {
		uses := l.Spec.CredentialRef != nil && l.Spec.CredentialRef.Name == o.GetName()
		if e := l.Spec.Encryption; e != nil && e.IdentityRef != nil && e.IdentityRef.Name == o.GetName() {
			uses = true
		}
		if uses {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: l.Namespace, Name: l.Name}})
		}
	}
	return out
}

// defaultValidationPeriod is how often a location is checked by default.
const defaultValidationPeriod = time.Minute

// sync makes the hub's Backups of l's namespace follow the backups l's
// store holds (storesync.PlanSync, as server mode's store sync): one a
// front end took there (ferry migrate, ferry backup create, a server)
// becomes a hub Backup of l, never run, with the store's status; a
// restorable one of l whose folder is gone is deleted.
func (r *LocationReconciler) sync(ctx context.Context, l *v1beta1.BackupStorageLocation) error {
	octx, cancel := context.WithTimeout(ctx, r.ConnectTimeout)
	loc, _, err := locationAccess(l, false).open(octx, r.Reader, "LocationUnavailable")
	cancel()
	if err != nil {
		return err
	}
	defer loc.Close()
	// Listing reads each backup's marker: a large location takes longer
	// than a connection.
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	entries, err := loc.ListBackups(sctx)
	if err != nil {
		return err
	}
	var list v1beta1.BackupList
	if err := r.Reader.List(ctx, &list, client.InNamespace(l.Namespace)); err != nil {
		return err
	}
	known, byName := map[string]storesync.Known{}, map[string]*v1beta1.Backup{}
	for i := range list.Items {
		b := &list.Items[i]
		byName[b.Name] = b
		phase := v1alpha1.Phase(b.Status.Phase)
		if b.Status.Phase == v1beta1.RunNew {
			phase = ""
		}
		known[b.Name] = storesync.Known{Phase: phase, Synced: b.Labels[storesync.LabelSyncedFrom] != "",
			InLocation: b.Status.StorageLocation == l.Spec.URL, Expiration: b.Status.Expiration}
	}
	plan := storesync.PlanSync(entries, known, r.Clock.Now())
	for _, sb := range plan.Add {
		if err := r.addSynced(ctx, l, byName[sb.Name], sb); err != nil {
			return err
		}
	}
	for _, name := range plan.Remove {
		// Synced or the hub's own: its data is gone from the location, so
		// it leaves the hub (its finalizer prunes what volume snapshots
		// are left), as server mode's store sync does. Looked for again
		// first: a backup that completed while the store was listed is
		// not in that listing.
		if _, err := loc.GetBackup(sctx, name); !errors.Is(err, store.ErrNotFound) {
			if err != nil {
				r.Log.Warn("store sync: backup not found in the listing, but there now", "backup", l.Namespace+"/"+name, "error", err)
			}
			continue
		}
		r.Log.Info("store sync: backup gone from the store, deleting it from the hub", "backup", l.Namespace+"/"+name, "location", l.Name)
		if err := r.Client.Delete(ctx, byName[name]); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// addSynced makes the hub's Backup of stored backup sb in l (or finishes
// b, one made before whose status was not written).
func (r *LocationReconciler) addSynced(ctx context.Context, l *v1beta1.BackupStorageLocation, b *v1beta1.Backup, sb *v1alpha1.Backup) error {
	if b == nil {
		b = &v1beta1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: sb.Name,
			Labels: map[string]string{storesync.LabelSyncedFrom: l.Name}, Annotations: storesync.Annotations(sb)},
			Spec: hubBackupSpec(sb.Spec, l.Name)}
		if err := r.Client.Create(ctx, b); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}
	}
	orig := b.DeepCopy()
	st := sb.Status
	b.Status = v1beta1.BackupStatus{Phase: v1beta1.RunPhase(st.Phase), StartTimestamp: st.StartTimestamp, CompletionTimestamp: st.CompletionTimestamp,
		Expiration: retention.Expiration(st.Expiration, st.StartTimestamp, sb.Spec.TTL), StorageLocation: l.Spec.URL, FailureReason: st.FailureReason}
	backupStatus(&b.Status, sb)
	meta.SetStatusCondition(&b.Status.Conditions, succeeded(b.Status.Phase, string(b.Status.Phase), "synced from the location "+l.Name))
	r.Log.Info("store sync: backup added to the hub", "backup", l.Namespace+"/"+b.Name, "location", l.Name, "phase", b.Status.Phase)
	return r.Client.Status().Patch(ctx, b, client.MergeFrom(orig))
}

// syncTimeout bounds one sync of a location.
const syncTimeout = 5 * time.Minute

// hubBackupSpec is the hub's spec of an engine backup spec s, in location.
func hubBackupSpec(s v1alpha1.BackupSpec, location string) v1beta1.BackupSpec {
	return v1beta1.BackupSpec{
		StorageLocationName:      location,
		IncludedNamespaces:       s.IncludedNamespaces,
		ExcludedNamespaces:       s.ExcludedNamespaces,
		IncludedResources:        s.IncludedResources,
		ExcludedResources:        s.ExcludedResources,
		LabelSelector:            s.LabelSelector,
		IncludeClusterResources:  s.IncludeClusterResources,
		PreferredVersionOnly:     s.PreferredVersionOnly,
		Images:                   s.Images,
		ImageRegistryMappings:    s.ImageRegistryMappings,
		ImagesRequired:           s.ImagesRequired,
		DefaultVolumesToFsBackup: s.DefaultVolumesToFsBackup,
		TTL:                      s.TTL,
	}
}

// backupAccess is how the location of an ended Backup b is opened: through
// the BackupStorageLocation it was written to, whose Credential and
// encryption apply: the one spec.storageLocationName names, else (it named
// none, as the Backup resolved it, or that one moved) the namespace's
// default at the same URL, else another at that URL; with the hub's own
// credentials when none is left.
func backupAccess(ctx context.Context, reader client.Reader, b *v1beta1.Backup) (access, error) {
	url := b.Status.StorageLocation
	var list v1beta1.BackupStorageLocationList
	if err := reader.List(ctx, &list, client.InNamespace(b.Namespace)); err != nil {
		return access{}, err
	}
	var best *v1beta1.BackupStorageLocation
	rank := func(l *v1beta1.BackupStorageLocation) int {
		switch {
		case l.Spec.URL != url:
			return 0
		case l.Name == b.Spec.StorageLocationName:
			return 3
		case l.Spec.Default:
			return 2
		}
		return 1
	}
	for i := range list.Items {
		if l := &list.Items[i]; rank(l) > 0 && (best == nil || rank(l) > rank(best)) {
			best = l
		}
	}
	if best != nil {
		return locationAccess(best, true), nil
	}
	// Not the hub's own credentials: the team that wrote it may have
	// reached that store with a Credential of its own, and the hub's
	// reach further (pkg/hub/admission).
	return access{}, fail("LocationNotFound", "Backup %q: no BackupStorageLocation of namespace %s has its URL (status.storageLocation %s): create one, with the credentialRef that reaches it, to restore, expire or delete it",
		b.Name, b.Namespace, store.Redact(url))
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
