package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

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
	// (pkg/controller). It returns one record per volume, in order.
	// Repository, if also set, gets kopia's maintenance afterwards.
	Backup func(ctx context.Context, backup string, vols []volumes.PodVolume, onProgress func(volumes.Totals)) []volumes.PodVolumeBackup
	// UnmountedClaims also backs up the claims of pods that have finished
	// (a Job's): Backup mounts each claim itself (volumes.Helpers).
	UnmountedClaims bool
}

// podCollector keeps the pods written into the archive, to choose their
// volumes once the archive is complete.
type podCollector struct {
	mu   sync.Mutex
	pods []corev1.Pod
	errs []error
}

func (c *podCollector) observe(res kube.Resource, data []byte) {
	if c == nil || res.Group != "" || res.GroupVersionResource.Resource != "pods" {
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
	volumes.ResolveClaims(r.ctx, r.cluster.Typed, vols)
	// Pre-backup hooks (a database flushed or locked) run before any data
	// is read, post-backup hooks after all of it, also when it failed.
	hs := r.backupHooks()
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
	sum := &v1alpha1.PodVolumeSummary{Total: len(rec.Volumes), Skipped: len(skipped)}
	for _, v := range rec.Volumes {
		if v.Error != "" {
			sum.Failed++
			r.results.Errorf("pod volume %s: %s", v.Key(), v.Error)
			continue
		}
		sum.Completed++
		sum.Bytes += v.Bytes
		sum.Files += v.Files
		sum.UploadedBytes += v.UploadedBytes
	}
	b.Status.PodVolumes = sum
	// Before the commit marker: a committed backup always has its record.
	return loc.PutSealedJSON(r.ctx, store.BackupVolumesKey(r.opts.Name), rec)
}
