package servermode

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/nodeagent"
	"github.com/kubeferry/ferry/pkg/transform"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// DefaultPodVolumeTimeout bounds how long a backup or restore waits for
// the node agents to finish its pod volumes (the default of Velero's
// fs-backup timeout, 4h).
const DefaultPodVolumeTimeout = 4 * time.Hour

// podVolumePoll is how often a backup or restore looks at the state of
// its PodVolumeBackups or PodVolumeRestores.
const podVolumePoll = 500 * time.Millisecond

// podVolumes hands the pod volume data of one Backup or Restore to the
// node agents: one PodVolumeBackup or PodVolumeRestore per volume, in the
// server's namespace, named <backup or restore>-<hash of the volume>,
// labelled with its owner's name and owned by it (deleting a Backup or
// Restore deletes them). The node agent of spec.node reconciles each
// (pkg/nodeagent); podVolumes waits for all of them to end. A
// volume on a node whose agent is not running (its heartbeat Lease is
// missing or expired) fails at once, without an object.
type podVolumes struct {
	client     client.Client
	reader     client.Reader // uncached: the state of each object as it is
	ns         string
	location   string
	backupName string // the Backup's name, or the one a Restore restores
	owner      metav1.OwnerReference
	timeout    time.Duration
	clock      clock.PassiveClock
	log        *slog.Logger
	grace      time.Duration // see nodeagent.Grace
	// gone, if set, is called (and the wait ends) when a PodVolumeBackup
	// or PodVolumeRestore vanishes and ownerGone says the Backup or
	// Restore itself was deleted: its objects went with it.
	gone      func()
	ownerGone func(context.Context) bool
	agents    map[string]agentAnswer // node -> nodeagent.Alive's last answer
}

// adopt decides about an object of the wanted name that already exists:
// it is taken (a retry of the same run) only if the same owner made it for
// the same pod volume; anything else (another Backup's or Restore's, or a
// hash collision) is an error naming both, never a silent mix-up.
func (p *podVolumes) adopt(ctx context.Context, o client.Object, pod v1alpha1.PodReference, volume string, specOf func(client.Object) (v1alpha1.PodReference, string)) error {
	name := o.GetName()
	if err := p.reader.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return fmt.Errorf("%s/%s exists but cannot be read: %w", p.ns, name, err)
	}
	owners := o.GetOwnerReferences()
	gotPod, gotVolume := specOf(o)
	if len(owners) != 1 || owners[0].UID != p.owner.UID || gotPod != pod || gotVolume != volume {
		return fmt.Errorf("%s/%s exists for another %s or volume (%s/%s volume %s): delete it, or use another name", p.ns, name, p.owner.Kind, gotPod.Namespace, gotPod.Name, gotVolume)
	}
	return nil
}

// ownerRef points at a Backup or Restore (kind) object o.
func ownerRef(kind string, o metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: kind, Name: o.GetName(), UID: o.GetUID()}
}

// backup is backup.PodVolumeOptions.Backup: it creates a PodVolumeBackup
// per volume on the node its pod ran on, and waits for each to end. A
// volume whose pod had no node, or whose node agent does not finish
// within the timeout, is a record with Error; it never blocks the others.
func (p *podVolumes) backup(ctx context.Context, backup string, vols []volumes.PodVolume, onProgress func(volumes.Totals)) []volumes.PodVolumeBackup {
	out := make([]volumes.PodVolumeBackup, len(vols))
	names := make([]string, len(vols))
	p.checkAgents(ctx, vols)
	for i, v := range vols {
		out[i] = volumes.PodVolumeBackup{PodVolume: v}
		if v.Node == "" {
			out[i].Error = fmt.Sprintf("pod %s/%s is not scheduled to a node: its volume %s has no data on any node", v.Namespace, v.Pod, v.Volume)
			continue
		}
		if err := p.agentAlive(ctx, v.Node); err != nil {
			out[i].Error = err.Error()
			continue
		}
		pvb := &v1alpha1.PodVolumeBackup{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: kube.ObjectName(backup, v.Key()),
				Labels: map[string]string{v1alpha1.LabelPodVolumeBackup: transform.LabelValue(backup)}, OwnerReferences: []metav1.OwnerReference{p.owner}},
			Spec: v1alpha1.PodVolumeBackupSpec{
				Pod:    v1alpha1.PodReference{Namespace: v.Namespace, Name: v.Pod, UID: v.PodUID},
				Volume: v.Volume, Node: v.Node, BackupName: backup, StorageLocationName: p.location,
				Identity: v.Identity, ClaimName: v.ClaimName, PersistentVolumeName: v.PVName,
			},
		}
		err := p.client.Create(ctx, pvb)
		if apierrors.IsAlreadyExists(err) {
			err = p.adopt(ctx, pvb, pvb.Spec.Pod, pvb.Spec.Volume, func(o client.Object) (v1alpha1.PodReference, string) {
				x := o.(*v1alpha1.PodVolumeBackup)
				return x.Spec.Pod, x.Spec.Volume
			})
		}
		if err != nil {
			out[i].Error = fmt.Sprintf("PodVolumeBackup %s/%s: %v", p.ns, pvb.Name, err)
			continue
		}
		names[i] = pvb.Name
	}
	p.log.Info("pod volumes handed to the node agents", "backup", backup, "volumes", len(vols))
	statuses := p.wait(ctx, names, newPVB, func(st []v1alpha1.PodVolumeStatus) {
		if onProgress != nil {
			onProgress(totals(st))
		}
	})
	for i, st := range statuses {
		if names[i] == "" {
			continue
		}
		if st.Phase != v1alpha1.PhaseCompleted {
			out[i].Error = fmt.Sprintf("PodVolumeBackup %s on node %s: %s", names[i], vols[i].Node, st.Message)
			continue
		}
		out[i].Path = st.Path
		out[i].SnapshotResult = &volumes.SnapshotResult{SnapshotID: st.SnapshotID, ParentSnapshotID: st.ParentSnapshotID,
			Bytes: st.BytesDone, Files: st.Files, UploadedBytes: st.UploadedBytes, CachedFiles: st.CachedFiles, Duration: took(st)}
	}
	return out
}

// checkAgents asks about the agents of all the volumes' nodes at once, so
// that nodes without one cost one grace period together, not one each.
func (p *podVolumes) checkAgents(ctx context.Context, vols []volumes.PodVolume) {
	nodes := map[string]bool{}
	for _, v := range vols {
		if v.Node != "" {
			nodes[v.Node] = true
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	answers := map[string]agentAnswer{}
	for node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := nodeagent.Alive(ctx, p.reader, p.ns, node, p.grace)
			mu.Lock()
			answers[node] = agentAnswer{err: err, at: time.Now()}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if p.agents == nil {
		p.agents = map[string]agentAnswer{}
	}
	for node, a := range answers {
		p.agents[node] = a
	}
}

// runUID is a PodVolumeRestore's spec.runUID: the run's UID when the
// pod waits for another restore's marker, else "".
func runUID(t volumes.RestoreTarget, restoreUID string) string {
	if t.MarkerUID(restoreUID) != restoreUID {
		return restoreUID
	}
	return ""
}

// agentAlive is nodeagent.Alive for p's namespace, with p's grace.
// A node found alive is not asked again in this run; a node found without
// an agent is not asked again for grace (so many volumes on it wait once),
// then again: its agent may have started since.
func (p *podVolumes) agentAlive(ctx context.Context, node string) error {
	if a, ok := p.agents[node]; ok && (a.err == nil || time.Since(a.at) < p.grace) {
		return a.err
	}
	err := nodeagent.Alive(ctx, p.reader, p.ns, node, p.grace)
	if p.agents == nil {
		p.agents = map[string]agentAnswer{}
	}
	p.agents[node] = agentAnswer{err: err, at: time.Now()}
	return err
}

type agentAnswer struct {
	err error
	at  time.Time
}

// restore is restore.PodVolumeOptions.Restore: for each target it waits
// (up to wait) for the restored pod to be scheduled, then creates a
// PodVolumeRestore on its node. The targets that only need the
// done-marker (MarkerOnly) are handed out after the data of their claim
// has been restored, and fail if it was not.
func (p *podVolumes) restore(ctx context.Context, restoreName, restoreUID string, targets []volumes.RestoreTarget, wait time.Duration, onProgress func(volumes.Totals)) []volumes.PodVolumeRestore {
	out := make([]volumes.PodVolumeRestore, len(targets))
	restored := map[string]bool{} // identity -> data restored
	var done []v1alpha1.PodVolumeStatus
	for pass := 0; pass < 2; pass++ {
		var idx []int
		var names []string
		deadline := p.clock.Now().Add(wait)
		for i, t := range targets {
			if t.MarkerOnly != (pass == 1) {
				continue
			}
			out[i] = volumes.PodVolumeRestore{RestoreTarget: t}
			if t.MarkerOnly && !restored[t.Identity] {
				out[i].Error = fmt.Sprintf("volume %s: the data of claim %s/%s was not restored", t.Key(), t.Namespace, t.ClaimName)
				continue
			}
			node, err := p.scheduled(ctx, t, deadline)
			if err == nil {
				err = p.agentAlive(ctx, node)
			}
			if err != nil {
				out[i].Error = err.Error()
				continue
			}
			pvr := &v1alpha1.PodVolumeRestore{
				ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: kube.ObjectName(restoreName, t.Key()),
					Labels: map[string]string{v1alpha1.LabelPodVolumeRestore: transform.LabelValue(restoreName)}, OwnerReferences: []metav1.OwnerReference{p.owner}},
				Spec: v1alpha1.PodVolumeRestoreSpec{
					Pod:    v1alpha1.PodReference{Namespace: t.Namespace, Name: t.Pod, UID: t.PodUID},
					Volume: t.Volume, Node: node, RestoreName: restoreName, BackupName: p.backupName,
					SnapshotID: t.SnapshotID, StorageLocationName: p.location, RestoreUID: t.MarkerUID(restoreUID), RunUID: runUID(t, restoreUID), MarkerOnly: t.MarkerOnly,
					ClaimName: t.ClaimName, PersistentVolumeName: t.PVName,
				},
			}
			err = p.client.Create(ctx, pvr)
			if apierrors.IsAlreadyExists(err) {
				err = p.adopt(ctx, pvr, pvr.Spec.Pod, pvr.Spec.Volume, func(o client.Object) (v1alpha1.PodReference, string) {
					x := o.(*v1alpha1.PodVolumeRestore)
					return x.Spec.Pod, x.Spec.Volume
				})
			}
			if err != nil {
				out[i].Error = fmt.Sprintf("PodVolumeRestore %s/%s: %v", p.ns, pvr.Name, err)
				continue
			}
			idx = append(idx, i)
			names = append(names, pvr.Name)
		}
		statuses := p.wait(ctx, names, newPVR, func(st []v1alpha1.PodVolumeStatus) {
			if onProgress != nil {
				onProgress(totals(append(append([]v1alpha1.PodVolumeStatus(nil), done...), st...)))
			}
		})
		done = append(done, statuses...)
		for j, st := range statuses {
			i := idx[j]
			if st.Phase != v1alpha1.PhaseCompleted {
				out[i].Error = fmt.Sprintf("PodVolumeRestore %s: %s", names[j], st.Message)
				if strings.Contains(st.Message, volumes.ErrAlreadyRestored.Error()) && !targets[i].MarkerOnly {
					// The claim holds an earlier restore's data: the other
					// pods mounting it still get their markers.
					restored[targets[i].Identity] = true
				}
				continue
			}
			out[i].Path = st.Path
			if !targets[i].MarkerOnly {
				restored[targets[i].Identity] = true
				out[i].RestoreResult = &volumes.RestoreResult{SnapshotID: st.SnapshotID, Bytes: st.BytesDone, Files: st.Files, Duration: took(st)}
			}
		}
	}
	return out
}

// scheduled waits until the pod of t exists with t's UID and is bound to
// a node, and returns the node.
func (p *podVolumes) scheduled(ctx context.Context, t volumes.RestoreTarget, deadline time.Time) (string, error) {
	var node string
	err := wait.PollUntilContextCancel(ctx, podVolumePoll, true, func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{}
		err := p.reader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Pod}, pod)
		switch {
		case err == nil && t.PodUID != "" && string(pod.UID) != t.PodUID:
			return false, fmt.Errorf("volume %s: pod %s/%s was replaced (UID %s, the restore made %s)", t.Key(), t.Namespace, t.Pod, pod.UID, t.PodUID)
		case err == nil && pod.Spec.NodeName != "":
			node = pod.Spec.NodeName
			return true, nil
		case err != nil && !apierrors.IsNotFound(err):
			return false, fmt.Errorf("volume %s: pod %s/%s: %w", t.Key(), t.Namespace, t.Pod, err)
		}
		if !p.clock.Now().Before(deadline) {
			if err != nil {
				return false, fmt.Errorf("volume %s: pod %s/%s: %w", t.Key(), t.Namespace, t.Pod, err)
			}
			return false, fmt.Errorf("volume %s: pod %s/%s was not scheduled to a node in time (is it unschedulable?)", t.Key(), t.Namespace, t.Pod)
		}
		return false, nil
	})
	return node, err
}

// newObject returns an empty PodVolumeBackup or PodVolumeRestore and a
// pointer to its status.
type newObject func() (client.Object, *v1alpha1.PodVolumeStatus)

func newPVB() (client.Object, *v1alpha1.PodVolumeStatus) {
	o := &v1alpha1.PodVolumeBackup{}
	return o, &o.Status
}

func newPVR() (client.Object, *v1alpha1.PodVolumeStatus) {
	o := &v1alpha1.PodVolumeRestore{}
	return o, &o.Status
}

// wait polls the named objects (an empty name is skipped) until each has
// ended (Completed or Failed) or p.timeout passes; it then marks the
// unfinished ones Failed, so that a node agent that comes late does not
// start them. It returns their statuses, in order.
func (p *podVolumes) wait(ctx context.Context, names []string, newObj newObject, progress func([]v1alpha1.PodVolumeStatus)) []v1alpha1.PodVolumeStatus {
	out := make([]v1alpha1.PodVolumeStatus, len(names))
	deadline := p.clock.Now().Add(p.timeout)
	for {
		pending := 0
		for i, name := range names {
			if name == "" || finished(out[i].Phase) {
				continue
			}
			o, s := newObj()
			err := p.reader.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: name}, o)
			switch {
			case apierrors.IsNotFound(err):
				if p.gone != nil && p.ownerGone != nil && p.ownerGone(ctx) {
					p.gone()
					return out
				}
				out[i] = v1alpha1.PodVolumeStatus{Phase: v1alpha1.PhaseFailed, Message: "deleted before it finished"}
				continue
			case err != nil:
				p.log.Info("reading pod volume state", "name", name, "err", err)
			default:
				out[i] = *s
			}
			if !finished(out[i].Phase) {
				pending++
			}
		}
		progress(out)
		if pending == 0 || ctx.Err() != nil {
			break
		}
		if !p.clock.Now().Before(deadline) {
			p.expire(ctx, names, out, newObj)
			break
		}
		select { // a last look after ctx ends, to report what is done
		case <-ctx.Done():
		case <-time.After(podVolumePoll):
		}
	}
	for i := range out {
		if names[i] != "" && !finished(out[i].Phase) {
			why := fmt.Sprintf("not finished within %s", p.timeout)
			if ctx.Err() != nil {
				why = ctx.Err().Error()
			}
			out[i] = v1alpha1.PodVolumeStatus{Phase: v1alpha1.PhaseFailed, Message: why + nodeAgentHint(out[i].Phase)}
		}
	}
	return out
}

func nodeAgentHint(ph v1alpha1.Phase) string {
	if ph == "" || ph == v1alpha1.PhaseNew {
		return ": no node agent took it (is ferry node-agent running on that node?)"
	}
	return ": the node agent was still at it"
}

// expire marks the unfinished objects Failed with optimistic concurrency:
// a node agent that finishes first wins.
func (p *podVolumes) expire(ctx context.Context, names []string, st []v1alpha1.PodVolumeStatus, newObj newObject) {
	for i, name := range names {
		if name == "" || finished(st[i].Phase) {
			continue
		}
		o, s := newObj()
		if err := p.reader.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: name}, o); err != nil {
			continue
		}
		if finished(s.Phase) {
			st[i] = *s
			continue
		}
		s.Phase = v1alpha1.PhaseFailed
		s.Message = fmt.Sprintf("not finished within %s%s", p.timeout, nodeAgentHint(st[i].Phase))
		now := metav1.NewTime(p.clock.Now())
		s.CompletionTimestamp = &now
		if err := p.client.Status().Update(ctx, o); err == nil {
			st[i] = *s
		}
	}
}

func finished(ph v1alpha1.Phase) bool {
	return ph == v1alpha1.PhaseCompleted || ph == v1alpha1.PhaseFailed
}

// totals adds up the statuses for progress reports.
func totals(st []v1alpha1.PodVolumeStatus) volumes.Totals {
	t := volumes.Totals{Volumes: len(st)}
	for _, s := range st {
		t.Bytes += s.BytesDone
		t.Files += s.Files
		if finished(s.Phase) {
			t.VolumesDone++
		}
	}
	return t
}

func took(st v1alpha1.PodVolumeStatus) volumes.Duration {
	if st.StartTimestamp == nil || st.CompletionTimestamp == nil {
		return 0
	}
	return volumes.Duration(st.CompletionTimestamp.Sub(st.StartTimestamp.Time))
}
