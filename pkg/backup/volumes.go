package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// PodVolumeOptions turn on the backup of pod volume data (file-system
// backup into the location's kopia repository, pkg/volumes).
type PodVolumeOptions struct {
	// Repository is the location's open kopia repository.
	Repository *volumes.Repository
	// HostPodsDir is the kubelet's pods directory on this machine
	// (/var/lib/kubelet/pods on a node), where each pod's volumes are.
	HostPodsDir string
	// OnProgress, if set, gets running totals of the data backed up.
	OnProgress func(volumes.Totals)
	// Backup, if set, moves the data instead of
	// Repository.BackupPodVolumes from HostPodsDir: server mode hands each
	// volume to the node agent of its pod's node as a PodVolumeBackup
	// (pkg/servermode). It returns one record per volume, in order.
	// Repository, if also set, gets kopia's maintenance afterwards.
	Backup func(ctx context.Context, backup string, vols []volumes.PodVolume, onProgress func(volumes.Totals)) []volumes.PodVolumeBackup
	// UnmountedClaims also backs up the claims of pods that have finished
	// (a Job's): Backup mounts each claim itself (helperpod.Helpers).
	UnmountedClaims bool
}

// podCollector keeps the pods written into the archive, to choose their
// volumes once the archive is complete.
type podCollector struct {
	mu   sync.Mutex
	pods []corev1.Pod
	// claims are the archived claims (their metadata and binding only).
	claims []corev1.PersistentVolumeClaim
	errs   []error
}

func (c *podCollector) observe(res kube.Resource, data []byte) {
	if c == nil || res.Group != "" {
		return
	}
	if res.GroupVersionResource.Resource == "persistentvolumeclaims" {
		var pvc corev1.PersistentVolumeClaim
		if json.Unmarshal(data, &pvc) == nil {
			c.mu.Lock()
			c.claims = append(c.claims, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: pvc.Namespace, Name: pvc.Name},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pvc.Spec.VolumeName}, Status: corev1.PersistentVolumeClaimStatus{Phase: pvc.Status.Phase}})
			c.mu.Unlock()
		}
		return
	}
	if res.GroupVersionResource.Resource != "pods" {
		return
	}
	var p corev1.Pod
	err := json.Unmarshal(data, &p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("decoding pod for its volumes: %w", err))
		return
	}
	c.pods = append(c.pods, p)
}

// backupVolumes backs up the chosen volumes of the archived pods and writes
// <name>-volumes.json. Each failed volume is an error of the backup (which
// becomes PartiallyFailed); an error returned means the record could not
// be written, and fails the backup.
func (r *run) backupVolumes(loc *store.Location, b *v1alpha1.Backup) error {
	o := r.opts.PodVolumes
	for _, err := range r.pods.errs {
		r.results.Errorf("%v", err)
	}
	vols, skipped := volumes.Select(r.pods.pods, r.opts.Spec.DefaultVolumesToFsBackup, o.UnmountedClaims)
	for _, sk := range skipped {
		if sk.Requested {
			r.results.Warnf("pod volume %s/%s/%s not backed up: %s", sk.Namespace, sk.Pod, sk.Volume, sk.Reason)
		}
	}
	if o.UnmountedClaims {
		vols = append(vols, r.unmountedClaims()...)
	}
	volumes.ResolveClaims(r.ctx, r.cluster.Typed, vols)
	vols, skipped = unbound(vols, skipped)
	// Pre-backup hooks (a database flushed or locked) run before any data
	// is read, post-backup hooks after all of it, also when it failed.
	hs, err := r.backupHooks()
	if err != nil {
		return fmt.Errorf("backup hook annotations cannot be read, so no hook ran and no volume data was backed up: %w", err)
	}
	if err := r.runHooks(hs, true); err != nil {
		if perr := r.runHooks(hs, false); perr != nil {
			r.results.Errorf("%v", perr)
		}
		return fmt.Errorf("pre-backup hook failed (on-error: Fail), so no volume data was backed up: %w", err)
	}
	r.opts.Log.Info("backing up pod volumes", "volumes", len(vols), "skipped", len(skipped))
	rec := &volumes.BackupRecord{Repository: volumes.RepositoryPrefix, Skipped: skipped}
	if o.Backup != nil {
		rec.Volumes = o.Backup(r.ctx, r.opts.Name, vols, o.OnProgress)
	} else {
		rec.Volumes = o.Repository.BackupPodVolumes(r.ctx, o.HostPodsDir, r.opts.Name, vols, o.OnProgress)
	}
	if err := r.runHooks(hs, false); err != nil {
		return fmt.Errorf("post-backup hook failed (on-error: Fail): %w", err)
	}
	if len(vols) > 0 && o.Repository != nil {
		// kopia's scheduled maintenance (index compaction hourly, garbage
		// collection daily), as the kopia CLI runs after its snapshots.
		if err := o.Repository.Maintain(r.ctx); err != nil {
			r.results.Warnf("volume repository maintenance: %v", err)
		}
	}
	// Volumes that hold no pod data (tokens, ConfigMaps, Secrets) are in
	// the record's skipped list, but are no skipped data.
	sum := &v1alpha1.PodVolumeSummary{Total: len(rec.Volumes)}
	for _, s := range skipped {
		if !s.NotData {
			sum.Skipped++
		}
	}
	for _, v := range rec.Volumes {
		if v.Error != "" {
			sum.Failed++
			r.results.Errorf("pod volume %s: %s", v.Key(), v.Error)
			continue
		}
		sum.Completed++
		if v.SnapshotResult != nil && v.Warning() != "" {
			// A live volume: what changed while it was read is named.
			r.results.Warnf("pod volume %s: %s", v.Key(), v.Warning())
		}
		sum.Bytes += v.Bytes
		sum.Files += v.Files
		sum.UploadedBytes += v.UploadedBytes
	}
	b.Status.PodVolumes = sum
	// Before the commit marker: a committed backup always has its record.
	return loc.PutSealedJSON(r.ctx, store.BackupVolumesKey(r.opts.Name), rec)
}

// unmountedClaims are the archived claims that no archived pod mounts (a
// database scaled to zero), bound to a volume: with
// spec.defaultVolumesToFsBackup a helper pod mounts and backs up each;
// without it each is a warning, as its data is not backed up.
func (r *run) unmountedClaims() []volumes.PodVolume {
	mounted := map[string]bool{}
	for _, p := range r.pods.pods {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				mounted[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName] = true
			}
		}
	}
	var out []volumes.PodVolume
	for _, c := range r.pods.claims {
		key := c.Namespace + "/" + c.Name
		if mounted[key] || c.Status.Phase != corev1.ClaimBound {
			continue
		}
		if !r.opts.Spec.DefaultVolumesToFsBackup {
			r.results.Warnf("claim %s: no pod mounts it, so its data is not backed up (spec.defaultVolumesToFsBackup backs up such claims too)", key)
			continue
		}
		out = append(out, volumes.PodVolume{Namespace: c.Namespace, Volume: c.Name, Type: "persistentVolumeClaim", ClaimName: c.Name,
			PVName: c.Spec.VolumeName, Identity: "pvc/" + key})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Identity < out[j].Identity })
	return out
}

// unbound moves the claims not bound to a volume (a Pending pod's
// WaitForFirstConsumer claim) from vols to skipped: they hold no data, and
// mounting one would make the source provision a volume for it.
func unbound(vols []volumes.PodVolume, skipped []volumes.SkippedVolume) ([]volumes.PodVolume, []volumes.SkippedVolume) {
	var keep []volumes.PodVolume
	for _, v := range vols {
		if v.ClaimName != "" && v.PVName == "" && v.Type == "persistentVolumeClaim" {
			skipped = append(skipped, volumes.SkippedVolume{Namespace: v.Namespace, Pod: v.Pod, Volume: v.Volume,
				Reason: fmt.Sprintf("claim %s/%s is not bound to a volume: it holds no data", v.Namespace, v.ClaimName)})
			continue
		}
		keep = append(keep, v)
	}
	return keep, skipped
}
