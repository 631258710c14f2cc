package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/kubeferry/ferry/pkg/store"
)

// PodVolumeBackup is the record of one pod volume in a backup, an entry of
// backups/<name>/<name>-volumes.json. Error is set (and the snapshot
// fields empty) when the volume could not be backed up.
type PodVolumeBackup struct {
	PodVolume
	// Path is the folder the data was read from on the node.
	Path string `json:"path,omitempty"`
	// HelperPod and HelperNode are the helper pod that did the work, and
	// its node (pkg/helperpod).
	HelperPod  string `json:"helperPod,omitempty"`
	HelperNode string `json:"helperNode,omitempty"`
	*SnapshotResult
	Error string `json:"error,omitempty"`
}

// BackupRecord is the content of <name>-volumes.json.
type BackupRecord struct {
	// Repository is where the snapshots are: "volumes/" in the location.
	Repository string            `json:"repository"`
	Volumes    []PodVolumeBackup `json:"volumes"`
	Skipped    []SkippedVolume   `json:"skipped,omitempty"`
}

// Failed counts the volumes whose backup failed.
func (r *BackupRecord) Failed() int {
	n := 0
	for _, v := range r.Volumes {
		if v.Error != "" {
			n++
		}
	}
	return n
}

// Snapshots counts the volumes the backup holds the data of.
func (r *BackupRecord) Snapshots() int {
	n := 0
	for _, v := range r.Volumes {
		if v.SnapshotResult != nil {
			n++
		}
	}
	return n
}

// LoadBackupRecord reads backup name's volume record
// (backups/<name>/<name>-volumes.json) from loc; nil when it has none.
func LoadBackupRecord(ctx context.Context, loc *store.Location, name string) (*BackupRecord, error) {
	rec := &BackupRecord{}
	err := loc.GetJSON(ctx, store.BackupVolumesKey(name), rec)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Totals are running totals over several volumes, for progress reports.
type Totals struct {
	Volumes, VolumesDone int
	Bytes, Files         int64
}

// BackupPodVolumes snapshots each volume in vols from the kubelet pods
// directory podsDir (see HostPath), one after the other (kopia reads each
// volume's files in parallel). Each snapshot is tagged with backup
// (TagBackup). A volume that fails is an entry with Error; the others go
// on. onProgress, if set, gets running totals.
func (r *Repository) BackupPodVolumes(ctx context.Context, podsDir, backup string, vols []PodVolume, onProgress func(Totals)) []PodVolumeBackup {
	out := make([]PodVolumeBackup, len(vols))
	var base Totals
	base.Volumes = len(vols)
	for i, v := range vols {
		out[i] = PodVolumeBackup{PodVolume: v}
		if ctx.Err() != nil {
			out[i].Error = ctx.Err().Error()
			continue
		}
		dir, err := HostPath(podsDir, v.PodUID, v)
		if err != nil {
			out[i].Error = err.Error()
			continue
		}
		out[i].Path = dir
		var prog Progress
		if onProgress != nil {
			prog = func(b, f int64) {
				t := base
				t.Bytes += b
				t.Files += f
				onProgress(t)
			}
		}
		tags := map[string]string{TagBackup: backup, "ferry-pod": v.Namespace + "/" + v.Pod, "ferry-pod-volume": v.Volume}
		res, err := r.Snapshot(ctx, dir, v.Identity, tags, prog)
		if err != nil {
			out[i].Error = err.Error()
		} else {
			out[i].SnapshotResult = res
			base.Bytes += res.Bytes
			base.Files += res.Files
		}
		base.VolumesDone++
		if onProgress != nil {
			onProgress(base)
		}
	}
	return out
}

// RestoreTarget is one volume of a restored pod to fill: the pod and
// volume in the target cluster (PodUID and, for claims, PVName set) and
// the snapshot to restore. With MarkerOnly the data arrives through
// another pod mounting the same claim; only the done-marker is written.
type RestoreTarget struct {
	PodVolume
	SnapshotID string `json:"snapshotID"`
	MarkerOnly bool   `json:"markerOnly,omitempty"`
	// RestoreUID is the done-marker the pod waits for (its
	// v1alpha1.AnnotationRestoreUID), when an earlier restore of the same
	// backup made it wait; empty: the running restore's own.
	RestoreUID string `json:"restoreUID,omitempty"`
}

// MarkerUID is the done-marker to write for t in a restore whose UID is
// restoreUID.
func (t RestoreTarget) MarkerUID(restoreUID string) string {
	if t.RestoreUID != "" {
		return t.RestoreUID
	}
	return restoreUID
}

// PodVolumeRestore is the outcome of one RestoreTarget.
type PodVolumeRestore struct {
	RestoreTarget
	Path       string `json:"path,omitempty"`
	HelperPod  string `json:"helperPod,omitempty"`
	HelperNode string `json:"helperNode,omitempty"`
	*RestoreResult
	Error string `json:"error,omitempty"`
}

// RestorePodVolumes restores each target into its volume folder in the
// kubelet pods directory podsDir, waiting up to wait for the folder to
// appear (the kubelet creates it when it mounts the volume, before the
// pod's init containers run), then writes the done-marker of restoreUID.
// Targets with MarkerOnly come after the data and get their marker only
// if the data of their claim was restored. Failures are per volume.
func (r *Repository) RestorePodVolumes(ctx context.Context, podsDir, restoreUID string, targets []RestoreTarget, wait time.Duration, onProgress func(Totals)) []PodVolumeRestore {
	out := make([]PodVolumeRestore, len(targets))
	restored := map[string]bool{} // identity -> data restored, or there from an earlier restore
	var base Totals
	base.Volumes = len(targets)
	var bytes, files atomic.Int64
	for pass := 0; pass < 2; pass++ {
		for i, t := range targets {
			if t.MarkerOnly != (pass == 1) {
				continue
			}
			if t.MarkerOnly {
				if !restored[t.Identity] {
					out[i] = PodVolumeRestore{RestoreTarget: t, Error: fmt.Sprintf("volume %s: the data of claim %s/%s was not restored", t.Key(), t.Namespace, t.ClaimName)}
					continue
				}
				out[i] = MarkClaimRestored(ctx, podsDir, restoreUID, t, wait)
				continue
			}
			out[i] = PodVolumeRestore{RestoreTarget: t}
			dir, err := WaitHostPath(ctx, podsDir, t.PodVolume, wait)
			if err != nil {
				out[i].Error = err.Error()
				continue
			}
			out[i].Path = dir
			prog := func(b, f int64) {
				if onProgress != nil {
					tt := base
					tt.Bytes, tt.Files = bytes.Load()+b, files.Load()+f
					onProgress(tt)
				}
			}
			res, err := r.Restore(ctx, t.SnapshotID, dir, t.MarkerUID(restoreUID), prog)
			if err == nil && res.AlreadyRestored && t.MarkerUID(restoreUID) != restoreUID {
				// An earlier restore wrote it: its pod has run on it since.
				err = fmt.Errorf("%w: %s has the done-marker of restore %s; the data is not overwritten", ErrAlreadyRestored, dir, t.RestoreUID)
			}
			if errors.Is(err, ErrAlreadyRestored) {
				// The claim holds the data an earlier restore wrote: the
				// other pods mounting it still get their markers.
				restored[t.Identity] = true
			}
			if err != nil {
				out[i].Error = fmt.Sprintf("volume %s: %v", t.Key(), err)
				continue
			}
			out[i].RestoreResult = res
			restored[t.Identity] = true
			bytes.Add(res.Bytes)
			files.Add(res.Files)
			base.VolumesDone++
		}
	}
	return out
}

// MarkClaimRestored writes only the done-marker (t.MarkerUID(restoreUID),
// the one its pod waits for; one an earlier restore wrote is a skip,
// ErrAlreadyRestored) into the
// volume of target t (MarkerOnly: a pod that mounts a claim whose data
// another target restored), once its folder appears in podsDir (waiting
// up to wait). The caller must know the claim's data was restored.
func MarkClaimRestored(ctx context.Context, podsDir, restoreUID string, t RestoreTarget, wait time.Duration) PodVolumeRestore {
	out := PodVolumeRestore{RestoreTarget: t}
	dir, err := WaitHostPath(ctx, podsDir, t.PodVolume, wait)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Path = dir
	marker := t.MarkerUID(restoreUID)
	if _, err := os.Stat(MarkerPath(dir, marker)); err == nil {
		if marker != restoreUID {
			// An earlier restore gave this pod its marker already.
			out.Error = fmt.Sprintf("volume %s: %v: %s has the done-marker of restore %s", t.Key(), ErrAlreadyRestored, dir, marker)
		}
		return out
	}
	if err := WriteMarker(dir, marker, t.SnapshotID); err != nil {
		out.Error = err.Error()
	}
	return out
}

// WaitHostPath polls HostPath until it finds the folder or wait passes.
func WaitHostPath(ctx context.Context, podsDir string, v PodVolume, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		dir, err := HostPath(podsDir, v.PodUID, v)
		if err == nil || time.Now().After(deadline) {
			if err != nil {
				err = fmt.Errorf("%w (waited %s)", err, wait)
			}
			return dir, err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ClaimRestore is the data of one claim to write before anything mounts it.
type ClaimRestore struct {
	// Namespace and Claim are the claim in the target.
	Namespace, Claim string
	SnapshotID       string
	// Source is the volume the data was backed up from.
	Source PodVolume
	// Keep leaves a claim that does not hold the snapshot alone
	// (ErrKeptExisting) instead of writing the snapshot into it.
	Keep bool
}

// Key names the claim in errors.
func (c ClaimRestore) Key() string { return "claim " + c.Namespace + "/" + c.Claim }
