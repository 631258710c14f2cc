package volumes

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/pkg/transform"
)

// PendingRestore is a restored pod whose volume data has not arrived: it
// runs the ferry-restore-wait init container and a done-marker of its
// restore is missing from one of its volumes.
type PendingRestore struct {
	Pod *corev1.Pod
	// Backup, RestoreUID and SourceNamespace come from the pod's
	// annotations (transform.AnnotationRestore*).
	Backup, RestoreUID, SourceNamespace string
	Volumes                             []string
}

// PendingRestores returns the pods among pods that wait for volume data
// which is not yet in podsDir (the kubelet pods directory of this node),
// and that a restore left to a polling node agent
// (transform.AnnotationRestoreVolumesBy).
// Volumes whose directory is not there yet (not mounted) count as pending.
func PendingRestores(pods []corev1.Pod, podsDir string) []PendingRestore {
	var out []PendingRestore
	for i := range pods {
		p := &pods[i]
		uid := p.Annotations[transform.AnnotationRestoreUID]
		if uid == "" || !hasInitContainer(p, transform.RestoreWaitContainer) {
			continue
		}
		if by := p.Annotations[transform.AnnotationRestoreVolumesBy]; by != "" && by != transform.RestoreByNodeAgent {
			continue // the restore itself, or a PodVolumeRestore, writes it
		}
		vols := splitList(p.Annotations[transform.AnnotationRestoreVolumes])
		if markersPresent(podsDir, p, uid) >= len(vols) {
			continue
		}
		var names []string
		for v := range vols {
			names = append(names, v)
		}
		sort.Strings(names)
		out = append(out, PendingRestore{Pod: p, Backup: p.Annotations[transform.AnnotationRestoreBackup], RestoreUID: uid,
			SourceNamespace: p.Annotations[transform.AnnotationSourceNamespace], Volumes: names})
	}
	return out
}

func hasInitContainer(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// markersPresent counts the done-markers of restore uid in the pod's
// volume folders (<podsDir>/<pod UID>/volumes/<plugin>/<name>[/mount]).
func markersPresent(podsDir string, p *corev1.Pod, uid string) int {
	n := 0
	for _, pattern := range []string{
		filepath.Join(podsDir, string(p.UID), "volumes", "*", "*", MarkerDir, uid),
		filepath.Join(podsDir, string(p.UID), "volumes", "*", "*", "mount", MarkerDir, uid),
	} {
		m, _ := filepath.Glob(pattern)
		n += len(m)
	}
	return n
}

// RestorePending restores the data of one pending pod from rec, the
// backup's volume record: each of its waiting volumes is matched to the
// record of the same pod (by source namespace and name) or, for a claim,
// to a pod that mounted the same claim. It resolves claims with client,
// waiting up to wait.
func (r *Repository) RestorePending(ctx context.Context, client kubernetes.Interface, podsDir string, p PendingRestore, rec *BackupRecord, wait time.Duration) []PodVolumeRestore {
	want := map[string]bool{}
	for _, v := range p.Volumes {
		want[v] = true
	}
	srcKey := p.SourceNamespace + "/" + p.Pod.Name
	keep := &BackupRecord{}
	var failed []PodVolumeRestore
	for _, b := range rec.Volumes {
		if !want[b.Volume] {
			continue
		}
		mine := b.Namespace+"/"+b.Pod == srcKey
		for _, o := range b.AlsoMountedBy {
			mine = mine || o == srcKey
		}
		if !mine {
			continue
		}
		delete(want, b.Volume)
		if b.Error != "" || b.SnapshotResult == nil {
			failed = append(failed, PodVolumeRestore{RestoreTarget: RestoreTarget{PodVolume: b.PodVolume}, Error: "not in the backup: " + b.Error})
			continue
		}
		// This pod receives the data (a claim is filled once per node agent
		// that finds a waiting pod; the data is the same).
		b.Namespace, b.Pod, b.AlsoMountedBy = p.SourceNamespace, p.Pod.Name, nil
		keep.Volumes = append(keep.Volumes, b)
	}
	for v := range want {
		failed = append(failed, PodVolumeRestore{RestoreTarget: RestoreTarget{PodVolume: PodVolume{Namespace: p.Pod.Namespace, Pod: p.Pod.Name, Volume: v}},
			Error: fmt.Sprintf("backup %s has no data for volume %s of pod %s", p.Backup, v, srcKey)})
	}
	targetNS := func(string) string { return p.Pod.Namespace }
	targets, tf := Targets(ctx, client, p.Backup, keep, targetNS, wait)
	out := r.RestorePodVolumes(ctx, podsDir, p.RestoreUID, targets, wait, nil)
	return append(append(out, tf...), failed...)
}

// Summary is a one-line account of restores, for logs.
func Summary(res []PodVolumeRestore) string {
	var ok, bad []string
	for _, r := range res {
		if r.Error != "" {
			bad = append(bad, r.Key()+": "+r.Error)
		} else {
			ok = append(ok, r.Key())
		}
	}
	return fmt.Sprintf("%d restored (%s), %d failed %s", len(ok), strings.Join(ok, ", "), len(bad), strings.Join(bad, "; "))
}
