package nodeagent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// Poller is the polling node agent: every Interval it lists the pods of
// Node, finds those that a restore made wait for their volume data
// (PendingRestores) and restores it from the backup's volume record in
// Location, through Repo, into HostPodsDir.
type Poller struct {
	Location *store.Location
	Repo     *volumes.Repository
	Client   kubernetes.Interface
	// Node is the node whose pods to serve; "" serves every pod (a
	// single-machine cluster).
	Node        string
	HostPodsDir string
	// Wait bounds the wait for a pod's claim binding and volume folder.
	Wait     time.Duration
	Interval time.Duration
	// Out gets one line per pod served; Log the warnings.
	Out io.Writer
	Log *slog.Logger
}

// Run polls until ctx ends, or, with once, looks once. It returns the
// number of pod volumes that failed.
func (p *Poller) Run(ctx context.Context, once bool) (failures int, err error) {
	records := map[string]*volumes.BackupRecord{}
	for {
		failures += p.poll(ctx, records)
		if once {
			return failures, nil
		}
		select {
		case <-ctx.Done():
			return failures, nil
		case <-time.After(p.Interval):
		}
	}
}

// poll serves the pods waiting now, and returns the number of their
// volumes that failed. records caches the backups' volume records.
func (p *Poller) poll(ctx context.Context, records map[string]*volumes.BackupRecord) (failures int) {
	opts := metav1.ListOptions{}
	if p.Node != "" {
		opts.FieldSelector = "spec.nodeName=" + p.Node
	}
	pods, err := p.Client.CoreV1().Pods(corev1.NamespaceAll).List(ctx, opts)
	if err != nil {
		p.Log.Warn("listing pods", "node", p.Node, "err", err)
		return 0
	}
	pending := PendingRestores(pods.Items, p.HostPodsDir)
	if len(pending) > 0 {
		// Snapshots made since the repository was opened are seen only
		// after a refresh of its indexes.
		if err := p.Repo.Refresh(ctx); err != nil {
			p.Log.Warn("refreshing the volume repository", "err", err)
		}
	}
	for _, pr := range pending {
		rec, ok := records[pr.Backup]
		if !ok {
			if rec, err = volumes.LoadBackupRecord(ctx, p.Location, pr.Backup); err != nil || rec == nil {
				p.Log.Warn("reading the backup's volume records", "backup", pr.Backup, "pod", pr.Pod.Namespace+"/"+pr.Pod.Name, "err", err)
				continue
			}
			records[pr.Backup] = rec
		}
		res := RestorePending(ctx, p.Repo, p.Client, p.HostPodsDir, pr, rec, p.Wait)
		for _, r := range res {
			if r.Error != "" {
				failures++
			}
		}
		fmt.Fprintf(p.Out, "pod %s/%s: %s\n", pr.Pod.Namespace, pr.Pod.Name, Summary(res))
	}
	return failures
}

// PendingRestore is a restored pod whose volume data has not arrived: it
// runs the ferry-restore-wait init container and a done-marker of its
// restore is missing from one of its volumes.
type PendingRestore struct {
	Pod *corev1.Pod
	// Backup, RestoreUID and SourceNamespace come from the pod's
	// annotations (v1alpha1.AnnotationRestore*).
	Backup, RestoreUID, SourceNamespace string
	Volumes                             []string
}

// PendingRestores returns the pods among pods that wait for volume data
// which is not yet in podsDir (the kubelet pods directory of this node),
// and that a restore left to a polling node agent
// (v1alpha1.AnnotationRestoreVolumesBy).
// Volumes whose directory is not there yet (not mounted) count as pending.
func PendingRestores(pods []corev1.Pod, podsDir string) []PendingRestore {
	var out []PendingRestore
	for i := range pods {
		p := &pods[i]
		uid := p.Annotations[v1alpha1.AnnotationRestoreUID]
		waits := slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == v1alpha1.RestoreWaitContainer })
		if uid == "" || !waits {
			continue
		}
		if by := p.Annotations[v1alpha1.AnnotationRestoreVolumesBy]; by != "" && by != v1alpha1.RestoreByNodeAgent {
			continue // the restore itself, or a PodVolumeRestore, writes it
		}
		vols := volumeNames(p.Annotations[v1alpha1.AnnotationRestoreVolumes])
		if markersPresent(podsDir, p, uid) >= len(vols) {
			continue
		}
		out = append(out, PendingRestore{Pod: p, Backup: p.Annotations[v1alpha1.AnnotationRestoreBackup], RestoreUID: uid,
			SourceNamespace: p.Annotations[v1alpha1.AnnotationSourceNamespace], Volumes: vols})
	}
	return out
}

// volumeNames are the names in the comma-separated list s, sorted, each
// once.
func volumeNames(s string) []string {
	set := map[string]bool{}
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			set[x] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// markersPresent counts the done-markers of restore uid in the pod's
// volume folders (<podsDir>/<pod UID>/volumes/<plugin>/<name>[/mount]).
func markersPresent(podsDir string, p *corev1.Pod, uid string) int {
	n := 0
	for _, pattern := range []string{
		filepath.Join(podsDir, string(p.UID), "volumes", "*", "*", v1alpha1.DoneMarkerDir, uid),
		filepath.Join(podsDir, string(p.UID), "volumes", "*", "*", "mount", v1alpha1.DoneMarkerDir, uid),
	} {
		m, _ := filepath.Glob(pattern)
		n += len(m)
	}
	return n
}

// RestorePending restores the data of one pending pod p from rec, the
// backup's volume record, through repo: each of its waiting volumes is
// matched to the record of the same pod (by source namespace and name)
// or, for a claim, to a pod that mounted the same claim. It resolves
// claims with client, waiting up to wait.
func RestorePending(ctx context.Context, repo *volumes.Repository, client kubernetes.Interface, podsDir string, p PendingRestore, rec *volumes.BackupRecord, wait time.Duration) []volumes.PodVolumeRestore {
	want := map[string]bool{}
	for _, v := range p.Volumes {
		want[v] = true
	}
	srcKey := p.SourceNamespace + "/" + p.Pod.Name
	keep := &volumes.BackupRecord{}
	var failed []volumes.PodVolumeRestore
	for _, b := range rec.Volumes {
		if !want[b.Volume] {
			continue
		}
		mine := b.Namespace+"/"+b.Pod == srcKey || slices.Contains(b.AlsoMountedBy, srcKey)
		if !mine {
			continue
		}
		delete(want, b.Volume)
		if b.Error != "" || b.SnapshotResult == nil {
			failed = append(failed, volumes.PodVolumeRestore{RestoreTarget: volumes.RestoreTarget{PodVolume: b.PodVolume}, Error: "not in the backup: " + b.Error})
			continue
		}
		// This pod receives the data (a claim is filled once per node agent
		// that finds a waiting pod; the data is the same).
		b.Namespace, b.Pod, b.AlsoMountedBy = p.SourceNamespace, p.Pod.Name, nil
		keep.Volumes = append(keep.Volumes, b)
	}
	for v := range want {
		failed = append(failed, volumes.PodVolumeRestore{RestoreTarget: volumes.RestoreTarget{PodVolume: volumes.PodVolume{Namespace: p.Pod.Namespace, Pod: p.Pod.Name, Volume: v}},
			Error: fmt.Sprintf("backup %s has no data for volume %s of pod %s", p.Backup, v, srcKey)})
	}
	targetNS := func(string) string { return p.Pod.Namespace }
	targets, tf := volumes.Targets(ctx, client, p.Backup, keep, targetNS, wait)
	out := repo.RestorePodVolumes(ctx, podsDir, p.RestoreUID, targets, wait, nil)
	return append(append(out, tf...), failed...)
}

// Summary is a one-line account of restores, for logs.
func Summary(res []volumes.PodVolumeRestore) string {
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
