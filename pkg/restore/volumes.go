package restore

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/transform"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// DefaultRestoreHelperImage runs the ferry-restore-wait init container.
const DefaultRestoreHelperImage = "busybox:1.37"

// PodVolumeOptions turn on the restore of pod volume data in this process
// (direct mode): the restored pods' volumes are filled from the
// location's kopia repository in the kubelet pods directory of this machine.
type PodVolumeOptions struct {
	Repository *volumes.Repository
	// HostPodsDir is the kubelet's pods directory (/var/lib/kubelet/pods).
	HostPodsDir string
	// HelperImage runs the init container that waits for the data
	// (default DefaultRestoreHelperImage).
	HelperImage string
	// Wait bounds the wait for each restored pod, claim binding and volume
	// folder (default 10m).
	Wait time.Duration
	// OnProgress, if set, gets running totals of the data restored.
	OnProgress func(volumes.Totals)
	// ByNodeAgent leaves the data to the node agents (ferry node-agent on
	// each node): the restore only makes the pods wait for it.
	ByNodeAgent bool
	// Restore, if set, moves the data instead of
	// Repository.RestorePodVolumes into HostPodsDir: server mode hands each
	// target to the node agent of its pod's node as a PodVolumeRestore
	// (pkg/servermode). It gets the targets, resolved in the target
	// cluster (pod UIDs, bound volumes), and returns one outcome per target.
	Restore func(ctx context.Context, restoreUID string, targets []volumes.RestoreTarget, wait time.Duration, onProgress func(volumes.Totals)) []volumes.PodVolumeRestore
	// Claims, if set, writes the data of claims before any workload that
	// mounts them is created (helperpod.Helpers.RestoreClaims): the claims
	// of the backup are restored right after the claim objects, and the
	// restored pods do not wait for them. Only volumes that are not
	// claims (an opted-in emptyDir) then go through Restore or
	// HostPodsDir, with the pods waiting in their init container.
	Claims func(ctx context.Context, restoreUID string, claims []volumes.ClaimRestore, onProgress func(volumes.Totals)) []volumes.PodVolumeRestore
	// CheckClaims, if set, walks restored claims in the target and
	// compares each with the list its restore kept there
	// (helperpod.Helpers.CheckClaims): the data check of a verification
	// (docs/design.md#runtime-checks).
	CheckClaims func(ctx context.Context, claims []volumes.ClaimRef) []volumes.ClaimCheckResult
	// Check, if set, runs before anything is written when the backup
	// holds volume data: it opens the repository, so that a wrong
	// password fails the restore at once.
	Check func(ctx context.Context) error
}

// byClaim says whether volume v's data goes into its claim before the
// workloads (PodVolumeOptions.Claims). A generic ephemeral volume's claim
// is made with its pod, so its data waits in the pod's init container.
func (o *PodVolumeOptions) byClaim(v volumes.PodVolume) bool {
	return o.Claims != nil && v.ClaimName != "" && v.Type != "ephemeral"
}

// by is the v1alpha1.AnnotationRestoreVolumesBy value of these options.
func (o *PodVolumeOptions) by() string {
	switch {
	case o.ByNodeAgent:
		return v1alpha1.RestoreByNodeAgent
	case o.Restore != nil:
		return v1alpha1.RestoreByPodVolumeRestore
	}
	return v1alpha1.RestoreByRestore
}

// planPodVolumes decides which restored pods wait for volume data: the
// pods of the record that the plan restores. The others are warnings.
func planPodVolumes(rec *volumes.BackupRecord, p *Plan, o *Options, uid string, results *report.Results) *transform.PodVolumeRestore {
	restored := map[string]*Item{} // source ns/name
	for _, it := range p.Items {
		if it.GroupResource == "pods" && it.Skip == "" {
			restored[it.Namespace+"/"+it.Name] = it
		}
	}
	pvr := &transform.PodVolumeRestore{RestoreUID: uid, Image: o.PodVolumes.HelperImage, Volumes: map[string][]string{}, Backup: o.Spec.BackupName, SourceNamespaces: map[string]string{}, By: o.PodVolumes.by()}
	for _, v := range rec.Volumes {
		if o.PodVolumes.byClaim(v.PodVolume) {
			continue // restoreClaims
		}
		if v.Error != "" {
			results.Warnf("pod volume %s: not in the backup (%s)", v.Key(), v.Error)
			continue
		}
		for i, pod := range append([]string{v.Namespace + "/" + v.Pod}, v.AlsoMountedBy...) {
			ns, name, _ := strings.Cut(pod, "/")
			if restored[pod] == nil {
				results.Warnf("pod volume %s/%s/%s: the pod is not restored, so neither is its data", ns, name, v.Volume)
				continue
			}
			vol := v.Volume
			if i > 0 && v.ClaimName != "" {
				// Another pod mounting the same claim may call it otherwise.
				if vol = claimVolume(restored[pod], v.ClaimName); vol == "" {
					results.Warnf("pod volume %s/%s: no volume of the pod mounts claim %s", ns, name, v.ClaimName)
					continue
				}
			}
			key := o.mapNamespace(ns) + "/" + name
			pvr.SourceNamespaces[o.mapNamespace(ns)] = ns
			pvr.Volumes[key] = append(pvr.Volumes[key], vol)
		}
	}
	return pvr
}

// claimVolume returns the name of the volume of a pod item that mounts
// claim, or "".
func claimVolume(pod *Item, claim string) string {
	data, err := pod.Read()
	if err != nil {
		return ""
	}
	var p corev1.Pod
	if json.Unmarshal(data, &p) != nil {
		return ""
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return v.Name
		}
	}
	return ""
}

// restorePodVolumes fills the volumes of the restored pods that wait for
// them, and records each failure as an error of the restore.
func restorePodVolumes(ctx context.Context, cluster *kube.Cluster, rec *volumes.BackupRecord, pvr *transform.PodVolumeRestore, o *Options, results *report.Results, pre *v1alpha1.PodVolumeSummary) (*v1alpha1.PodVolumeSummary, []volumes.PodVolumeRestore) {
	po := o.PodVolumes
	// Only the pods this restore made wait.
	keep := &volumes.BackupRecord{}
	for _, v := range rec.Volumes {
		if v.Error != "" || po.byClaim(v.PodVolume) {
			continue
		}
		var also []string
		for _, p := range v.AlsoMountedBy {
			ns, name, _ := strings.Cut(p, "/")
			if len(pvr.Volumes[o.mapNamespace(ns)+"/"+name]) > 0 {
				also = append(also, p)
			}
		}
		if len(pvr.Volumes[o.mapNamespace(v.Namespace)+"/"+v.Pod]) == 0 {
			// The pod the claim was backed up through is not restored:
			// the first restored pod that mounts the claim takes the data
			// (Targets finds its name for the claim's volume).
			if len(also) == 0 {
				continue
			}
			v.Namespace, v.Pod, _ = strings.Cut(also[0], "/")
			v.PodUID = ""
			also = also[1:]
		}
		v.AlsoMountedBy = also
		keep.Volumes = append(keep.Volumes, v)
	}
	targets, failed := volumes.Targets(ctx, cluster.Typed, o.Spec.BackupName, keep, o.mapNamespace, po.Wait)
	var out []volumes.PodVolumeRestore
	switch {
	case len(targets) == 0:
	case po.Restore != nil:
		out = po.Restore(ctx, pvr.RestoreUID, targets, po.Wait, po.OnProgress)
	default:
		out = po.Repository.RestorePodVolumes(ctx, po.HostPodsDir, pvr.RestoreUID, targets, po.Wait, po.OnProgress)
	}
	out = append(out, failed...)
	sum := &v1alpha1.PodVolumeSummary{}
	if pre != nil {
		*sum = *pre
	}
	sum.Total += len(out)
	for _, r := range out {
		if strings.Contains(r.Error, volumes.ErrAlreadyRestored.Error()) || strings.Contains(r.Error, volumes.ErrNotWaiting.Error()) {
			// Restored by an earlier restore, or in use: its live data is kept.
			sum.Skipped++
			results.Warnf("pod volume %s: %s", r.Key(), r.Error)
			continue
		}
		if r.Error != "" {
			sum.Failed++
			results.Errorf("pod volume %s: %s", r.Key(), r.Error)
			continue
		}
		sum.Completed++
		if r.RestoreResult != nil {
			sum.Bytes += r.Bytes
			sum.Files += r.Files
		}
	}
	o.Log.Info("pod volumes restored", "completed", sum.Completed, "failed", sum.Failed, "bytes", sum.Bytes)
	return sum, out
}
