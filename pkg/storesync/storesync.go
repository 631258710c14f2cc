// Package storesync owns store sync: keeping a front end's Backup objects
// in step with the backups a backup storage location holds, the location
// being the source of truth. Server mode's sync controller and the hub's
// both plan with it, so that a backup taken by any front end (the CLI,
// another cluster's server, a hub) can be restored by the others
// (docs/design.md#one-engine-three-front-ends).
package storesync

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// LabelSyncedFrom marks a Backup that store sync made, with the name of
// its location. No front end runs such a Backup: its status comes from the
// store.
const LabelSyncedFrom = "ferry.dev/synced-from"

// AnnotationStoreUID on a Backup that store sync made is the UID the
// stored backup was written with: its expiry deletes the store folder only
// while it still holds that backup.
const AnnotationStoreUID = "ferry.dev/store-uid"

// Known is a front end's Backup object, as store sync sees it.
type Known struct {
	// Phase is its status.phase, in the engine's words ("" before a
	// status was written).
	Phase v1alpha1.Phase
	// Synced says store sync made it (LabelSyncedFrom).
	Synced bool
	// InLocation says it belongs to the location being synced.
	InLocation bool
	// Expiration is when it expires (nil: kept).
	Expiration *metav1.Time
}

// Plan is what to change in a front end.
type Plan struct {
	// Add are the stored backups to make Backup objects of (or, for one
	// store sync made without writing its status yet, to finish).
	Add []*v1alpha1.Backup
	// Remove names the Backups whose folder is gone from the location.
	Remove []string
}

// PlanSync compares the location's backups (stored) with the front end's
// Backups (known, by name) at now:
//   - a committed, restorable backup (Completed or PartiallyFailed) with no
//     Backup of its name is added, so a fresh target sees the source's
//     backups;
//   - a Completed or PartiallyFailed Backup of this location whose folder
//     is gone is removed, unless it has expired: its expiry deletes it,
//     after pruning its volume snapshots (pkg/retention); so is one store
//     sync made without writing its status, once its folder is gone.
//
// Backups that are Failed, InProgress or Incomplete are left alone both
// ways.
func PlanSync(stored []store.BackupEntry, known map[string]Known, now time.Time) Plan {
	var p Plan
	inStore := map[string]bool{}
	for _, e := range stored {
		inStore[e.Name] = true
		if !restorable(e.Backup.Status.Phase) {
			continue
		}
		if k, ok := known[e.Name]; ok && !(k.Synced && k.Phase == "") {
			continue
		}
		p.Add = append(p.Add, e.Backup)
	}
	for name, k := range known {
		if k.Synced && k.Phase == "" && !inStore[name] {
			// Made by an earlier sync that could not write its status,
			// and gone from the store since: it would stay New for ever.
			p.Remove = append(p.Remove, name)
			continue
		}
		if !k.InLocation || inStore[name] || !restorable(k.Phase) {
			continue
		}
		if k.Expiration != nil && !now.Before(k.Expiration.Time) {
			continue
		}
		p.Remove = append(p.Remove, name)
	}
	return p
}

func restorable(p v1alpha1.Phase) bool {
	return p == v1alpha1.PhaseCompleted || p == v1alpha1.PhasePartiallyFailed
}

// Owns reports whether stored, the location's record of a backup, is that
// of the Backup object with uid, labels and annotations: the object's own
// (it ran the backup), or the one store sync made it from. A record
// written before backups carried a UID belongs only to a Backup store sync
// made.
func Owns(uid types.UID, labels, annotations map[string]string, stored *v1alpha1.Backup) bool {
	if stored.UID == "" {
		return labels[LabelSyncedFrom] != ""
	}
	return stored.UID == uid || types.UID(annotations[AnnotationStoreUID]) == stored.UID
}

// Annotations are those of a Backup store sync makes from stored.
func Annotations(stored *v1alpha1.Backup) map[string]string {
	if stored.UID == "" {
		return nil
	}
	return map[string]string{AnnotationStoreUID: string(stored.UID)}
}
