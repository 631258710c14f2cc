package volumes

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// PodVolume is one volume of one pod chosen for backup: where its data
// is on the node and the stable identity its snapshots are kept under.
type PodVolume struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodUID    string `json:"podUID"`
	// Node is the node the pod ran on (spec.nodeName) when it was backed
	// up: where its data is, and whose node agent reads it in server mode.
	Node string `json:"node,omitempty"`
	// Volume is the pod's volume name (spec.volumes[].name).
	Volume string `json:"volume"`
	// Type is the volume source: persistentVolumeClaim, ephemeral, emptyDir, ...
	Type string `json:"type"`
	// ClaimName is the PersistentVolumeClaim, for claim-backed volumes.
	ClaimName string `json:"claimName,omitempty"`
	// PVName is the bound PersistentVolume (filled by ResolveClaims).
	PVName string `json:"pvName,omitempty"`
	// Identity names the data across backups, nodes and pod restarts:
	// "pvc/<namespace>/<claim>" for a claim, "pod/<namespace>/<pod>/<volume>"
	// otherwise. A volume's parent snapshot is the latest of its identity.
	Identity string `json:"identity"`
	// AlsoMountedBy lists the other pods (namespace/name) that mount the
	// same claim: its data is backed up once, through this pod.
	AlsoMountedBy []string `json:"alsoMountedBy,omitempty"`
}

// Key is namespace/pod/volume.
func (v PodVolume) Key() string { return v.Namespace + "/" + v.Pod + "/" + v.Volume }

// SkippedVolume is a pod volume not backed up, with the reason.
type SkippedVolume struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Volume    string `json:"volume"`
	Reason    string `json:"reason"`
	// Requested is set when the pod's backup-volumes annotation named the
	// volume: the user asked for it, so the backup warns.
	Requested bool `json:"requested,omitempty"`
	// NotData is set for a volume whose content is not the pod's data (a
	// service-account token, a ConfigMap, a Secret, a hostPath): it is
	// never copied, and counts as no skipped data.
	NotData bool `json:"notData,omitempty"`
}

// neverCopied are the volume types whose content is not the pod's data:
// the cluster recreates it from API objects (or the node) on restore.
func neverCopied(v corev1.Volume) string {
	switch {
	case v.HostPath != nil:
		return "hostPath: the node's own files are not pod data"
	case v.Secret != nil:
		return "secret: restored from the Secret object"
	case v.ConfigMap != nil:
		return "configMap: restored from the ConfigMap object"
	case v.Projected != nil:
		return "projected: built by the kubelet from API objects"
	case v.DownwardAPI != nil:
		return "downwardAPI: built by the kubelet from the pod"
	case v.Image != nil:
		return "image: pulled from the registry"
	}
	return ""
}

func volumeType(v corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case v.Ephemeral != nil:
		return "ephemeral"
	case v.EmptyDir != nil:
		return "emptyDir"
	case v.CSI != nil:
		return "csi"
	case v.NFS != nil:
		return "nfs"
	}
	return "other"
}

func splitList(s string) map[string]bool {
	out := map[string]bool{}
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out[x] = true
		}
	}
	return out
}

// Select chooses the volumes of pods to back up (Velero's file-system
// backup rules, docs "File System Backup"):
//
//   - backup.ferry.dev/backup-volumes=a,b opts volumes a and b in;
//   - with defaultToFS (spec.defaultVolumesToFsBackup) every volume is in
//     unless listed in backup.ferry.dev/backup-volumes-excludes;
//   - hostPath, secret, configMap, projected, downwardAPI and image volumes
//     are always skipped, and emptyDir volumes unless the annotation names
//     them, each with its reason;
//   - pods that have finished (Succeeded, Failed) are skipped: their
//     volumes are no longer mounted; with unmountedClaims (helper pods,
//     which mount a claim themselves) their claims are kept, without a
//     Node, unless a running pod mounts the same claim;
//   - a claim mounted by several pods is backed up once, through the first
//     pod in namespace/name order (the others are in AlsoMountedBy);
//   - a name in the annotation that is no volume of the pod is a skip
//     with that reason; skips of named volumes are Requested.
//
// Results are sorted by namespace, pod and volume.
func Select(pods []corev1.Pod, defaultToFS, unmountedClaims bool) ([]PodVolume, []SkippedVolume) {
	sorted := append([]corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Namespace != sorted[j].Namespace {
			return sorted[i].Namespace < sorted[j].Namespace
		}
		return sorted[i].Name < sorted[j].Name
	})
	var vols []PodVolume
	var skipped []SkippedVolume
	byClaim := map[string]int{}
	for _, pod := range sorted {
		in := splitList(pod.Annotations[v1alpha1.AnnotationBackupVolumes])
		out := splitList(pod.Annotations[v1alpha1.AnnotationExcludeVolumes])
		finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		have := map[string]bool{}
		for _, v := range pod.Spec.Volumes {
			have[v.Name] = true
		}
		var missing []string
		for name := range in {
			if !have[name] {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		for _, name := range missing {
			skipped = append(skipped, SkippedVolume{Namespace: pod.Namespace, Pod: pod.Name, Volume: name, Requested: true,
				Reason: "named in " + v1alpha1.AnnotationBackupVolumes + ", but the pod has no volume of that name"})
		}
		for _, v := range pod.Spec.Volumes {
			skip := func(reason string) {
				skipped = append(skipped, SkippedVolume{Namespace: pod.Namespace, Pod: pod.Name, Volume: v.Name, Reason: reason, Requested: in[v.Name]})
			}
			switch {
			case !in[v.Name] && !defaultToFS:
				continue // not asked for: not a skip worth reporting
			case out[v.Name]:
				skip("excluded by " + v1alpha1.AnnotationExcludeVolumes)
				continue
			case neverCopied(v) != "":
				skip(neverCopied(v))
				skipped[len(skipped)-1].NotData = true
				continue
			case v.EmptyDir != nil && !in[v.Name]:
				skip("emptyDir: not named in " + v1alpha1.AnnotationBackupVolumes)
				continue
			case finished && !(unmountedClaims && v.PersistentVolumeClaim != nil):
				skip(fmt.Sprintf("pod is %s: its volumes are not mounted", pod.Status.Phase))
				continue
			}
			pv := PodVolume{Namespace: pod.Namespace, Pod: pod.Name, PodUID: string(pod.UID), Node: pod.Spec.NodeName, Volume: v.Name, Type: volumeType(v)}
			if finished {
				pv.Node, pv.PodUID = "", "" // not mounted: a helper pod mounts it anywhere
			}
			switch {
			case v.PersistentVolumeClaim != nil:
				pv.ClaimName = v.PersistentVolumeClaim.ClaimName
			case v.Ephemeral != nil:
				// The generic ephemeral volume's claim is <pod>-<volume>.
				pv.ClaimName = pod.Name + "-" + v.Name
			}
			if pv.ClaimName != "" {
				pv.Identity = "pvc/" + pod.Namespace + "/" + pv.ClaimName
				if i, dup := byClaim[pv.Identity]; dup {
					if vols[i].Node == "" && pv.Node != "" {
						// A running pod mounts it: read it there.
						pv.AlsoMountedBy = append(vols[i].AlsoMountedBy, vols[i].Namespace+"/"+vols[i].Pod)
						vols[i] = pv
						continue
					}
					vols[i].AlsoMountedBy = append(vols[i].AlsoMountedBy, pod.Namespace+"/"+pod.Name)
					continue
				}
				byClaim[pv.Identity] = len(vols)
			} else {
				pv.Identity = "pod/" + pod.Namespace + "/" + pod.Name + "/" + v.Name
			}
			vols = append(vols, pv)
		}
	}
	return vols, skipped
}
