package servermode_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/nodeagent"
	"github.com/kubeferry/ferry/pkg/servermode"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/transform"
	"github.com/kubeferry/ferry/pkg/volumes"
	"github.com/kubeferry/ferry/pkg/volumes/volumetest"
)

const repoPassword = "server-mode-volumes"

// startAgent runs a node agent for node in-process against s until the
// test ends.
func startAgent(t *testing.T, s *site, node, podsDir, password string) {
	t.Helper()
	mgr, err := nodeagent.NewManager(nodeagent.Options{
		Namespace: ns, Node: node, HostPodsDir: podsDir, Config: s.c.Config, Password: password,
		Wait: 30 * time.Second, MetricsAddr: "0", ProbeAddr: "0", SeveralPerProcess: true,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("agent", s.c.Name+"/"+node),
	})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("node agent %s: %v", node, err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// volumePod creates, in namespace ns, a pod on node (spec.nodeName set:
// the control plane has no scheduler) with an inline CSI volume "data" and
// an emptyDir "cache", both annotated for backup.
func volumePod(t *testing.T, cs kubernetes.Interface, ns, name, node string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{v1alpha1.AnnotationBackupVolumes: "data,cache"}},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "busybox:1.37", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "cache", MountPath: "/cache"}}}},
			Volumes: []corev1.Volume{
				// An inline CSI volume: the node agent reads it in the pods
				// directory. (A claim goes to a helper pod, which mounts it;
				// that needs a real node: test/e2e TestServerWorkloadVolumes.)
				{Name: "data", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "disk.csi.example.com"}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	return p
}

// fakeLease keeps node's agent heartbeat Lease fresh until ctx ends, as
// an agent that is alive but never takes its objects would.
func fakeLease(ctx context.Context, s *site, node string) {
	for ctx.Err() == nil {
		dur := int32(nodeagent.LeaseDurationSecs)
		now := metav1.NewMicroTime(time.Now())
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nodeagent.LeaseName(node)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: &dur, RenewTime: &now}}
		if err := s.cl.Create(ctx, l); apierrors.IsAlreadyExists(err) {
			_ = s.cl.Get(ctx, client.ObjectKeyFromObject(l), l)
			l.Spec.RenewTime = &now
			_ = s.cl.Update(ctx, l)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// liveData is what changeRestoredFiles writes.
const liveData = "LIVE APP DATA"

// changeRestoredFiles writes liveData over a restored file in each of the
// two volumes of the restored pod app/db, whose node's pods directory is
// hostDir, as its application would; it returns their paths.
func changeRestoredFiles(t *testing.T, cs kubernetes.Interface, hostDir string) []string {
	t.Helper()
	pod, err := cs.CoreV1().Pods("app").Get(context.Background(), "db", metav1.GetOptions{})
	must(t, err)
	vols := filepath.Join(hostDir, string(pod.UID), "volumes")
	files := []string{
		filepath.Join(vols, "kubernetes.io~csi", "data", "mount", "a", "b", "c", "d", "deep.txt"),
		filepath.Join(vols, "kubernetes.io~empty-dir", "cache", "a", "b", "c", "d", "deep.txt"),
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("restored file: %v", err)
		}
		must(t, os.WriteFile(f, []byte(liveData), 0o644))
	}
	return files
}

type errPhase string

func (e errPhase) Error() string { return "phase " + string(e) }

// TestServerPodVolumes: in server mode, pod volume data goes through
// PodVolumeBackups and PodVolumeRestores that the node agent of the pod's
// node carries out. A Backup CR backs up a CSI volume and an emptyDir from the
// (stand-in) node's pods directory; in another cluster a Restore CR makes
// the restored pod wait, the agent of the node it is scheduled to fills
// its volumes, and the data arrives byte for byte with the done-markers.
// Bad cases: a pod on a node without an agent, a server without the
// repository password, and an object left InProgress by a stopped agent.
func TestServerPodVolumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	ctx := context.Background()
	cs, err := testenv.StartNamedClusters(ctx, t, "src", "dst")
	must(t, err)
	s3, err := testenv.StartS3(ctx, t)
	must(t, err)
	must(t, s3.CreateBucket(ctx, "ferry"))
	src := setupSite(t, cs[0], s3, s3.URL("ferry"))
	dst := setupSite(t, cs[1], s3, s3.URL("ferry"))
	src.start(t, servermode.Options{RepositoryPassword: repoPassword, PodVolumeTimeout: 20 * time.Second, AgentGrace: 3 * time.Second})
	dst.start(t, servermode.Options{PodVolumeTimeout: 60 * time.Second})
	hostSrc, hostDst := t.TempDir(), t.TempDir()
	startAgent(t, src, "node-a", hostSrc, repoPassword)
	startAgent(t, dst, "node-b", hostDst, repoPassword)
	srcCS := kubernetes.NewForConfigOrDie(cs[0].Config)
	dstCS := kubernetes.NewForConfigOrDie(cs[1].Config)

	must(t, src.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}))
	pod := volumePod(t, srcCS, "app", "db", "node-a")
	vols := filepath.Join(hostSrc, string(pod.UID), "volumes")
	dataDir := filepath.Join(vols, "kubernetes.io~csi", "data", "mount")
	cacheDir := filepath.Join(vols, "kubernetes.io~empty-dir", "cache")
	for i, d := range []string{dataDir, cacheDir} {
		must(t, os.MkdirAll(d, 0o755))
		_, err := volumetest.MakeTree(d, volumetest.TreeOptions{BigFile: 3 << 20, SmallFiles: 100, Seed: uint64(i + 1)})
		must(t, err)
	}

	b := v1alpha1.NewBackup("vb")
	b.Namespace = ns
	b.Spec.IncludedNamespaces = []string{"app"}
	must(t, src.cl.Create(ctx, b))
	b = waitBackup(t, src, "vb", 90*time.Second, v1alpha1.PhaseCompleted, v1alpha1.PhasePartiallyFailed, v1alpha1.PhaseFailed)
	if b.Status.Phase != v1alpha1.PhaseCompleted {
		t.Fatalf("backup %s: %s", b.Status.Phase, b.Status.FailureReason)
	}
	if pv := b.Status.PodVolumes; pv == nil || pv.Total != 2 || pv.Completed != 2 || pv.Bytes < 6<<20 {
		t.Fatalf("backup pod volumes: %+v", b.Status.PodVolumes)
	}
	// One PodVolumeBackup per volume, done on node-a, owned by the Backup,
	// and the store's volume record names the same snapshots.
	pvbs := &v1alpha1.PodVolumeBackupList{}
	must(t, src.cl.List(ctx, pvbs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelPodVolumeBackup: "vb"}))
	loc, err := store.Open(ctx, s3.URL("ferry"), store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}))
	must(t, err)
	defer loc.Close()
	rec := &volumes.BackupRecord{}
	must(t, loc.GetJSON(ctx, store.BackupVolumesKey("vb"), rec))
	snaps := map[string]string{}
	for _, v := range rec.Volumes {
		if v.Error != "" || v.SnapshotResult == nil || v.Node != "node-a" {
			t.Fatalf("record %+v", v)
		}
		snaps[v.Volume] = v.SnapshotID
	}
	if len(pvbs.Items) != 2 || len(snaps) != 2 {
		t.Fatalf("%d PodVolumeBackups, record %+v", len(pvbs.Items), rec.Volumes)
	}
	for _, p := range pvbs.Items {
		st := p.Status
		if st.Phase != v1alpha1.PhaseCompleted || st.SnapshotID == "" || st.SnapshotID != snaps[p.Spec.Volume] || st.BytesDone < 3<<20 ||
			p.Spec.Node != "node-a" || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != b.UID {
			t.Errorf("PodVolumeBackup %s: spec %+v status %+v owners %+v", p.Name, p.Spec, st, p.OwnerReferences)
		}
	}

	t.Run("restore through PodVolumeRestores", func(t *testing.T) {
		waitBackup(t, dst, "vb", 10*time.Second, v1alpha1.PhaseCompleted)
		kctx, stop := context.WithCancel(ctx)
		defer stop()
		go testenv.FakeScheduler(kctx, dstCS, "app", "node-b")
		go testenv.FakeKubelet(kctx, dstCS, "app", "node-b", hostDst)
		// A name longer than a label value (63) is cut and hashed in labels.
		name := "vr-" + strings.Repeat("long", 17)
		r := v1alpha1.NewRestore(name)
		r.Namespace = ns
		r.Spec.BackupName = "vb"
		must(t, dst.cl.Create(ctx, r))
		r = waitRestore(t, dst, name, v1alpha1.PhaseCompleted, v1alpha1.PhasePartiallyFailed, v1alpha1.PhaseFailed)
		if r.Status.Phase != v1alpha1.PhaseCompleted {
			t.Fatalf("restore %s: %s", r.Status.Phase, r.Status.FailureReason)
		}
		if pv := r.Status.PodVolumes; pv == nil || pv.Total != 2 || pv.Completed != 2 || pv.Bytes < 6<<20 {
			t.Fatalf("restore pod volumes: %+v", r.Status.PodVolumes)
		}
		got, err := dstCS.CoreV1().Pods("app").Get(ctx, "db", metav1.GetOptions{})
		must(t, err)
		if got.Annotations[v1alpha1.AnnotationRestoreVolumesBy] != v1alpha1.RestoreByPodVolumeRestore || got.Spec.InitContainers[0].Name != v1alpha1.RestoreWaitContainer {
			t.Errorf("restored pod: annotations %v, init containers %+v", got.Annotations, got.Spec.InitContainers)
		}
		uid := got.Annotations[v1alpha1.AnnotationRestoreUID]
		to := filepath.Join(hostDst, string(got.UID), "volumes")
		for from, into := range map[string]string{
			dataDir:  filepath.Join(to, "kubernetes.io~csi", "data", "mount"),
			cacheDir: filepath.Join(to, "kubernetes.io~empty-dir", "cache"),
		} {
			if diffs, err := volumetest.Compare(from, into, v1alpha1.DoneMarkerDir); err != nil || len(diffs) > 0 {
				t.Errorf("%s restored differently: %v %v", into, err, diffs)
			}
			if _, err := os.Stat(volumes.MarkerPath(into, uid)); err != nil {
				t.Errorf("done-marker: %v", err)
			}
		}
		pvrs := &v1alpha1.PodVolumeRestoreList{}
		must(t, dst.cl.List(ctx, pvrs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelPodVolumeRestore: transform.LabelValue(name)}))
		if len(pvrs.Items) != 2 {
			t.Fatalf("%d PodVolumeRestores", len(pvrs.Items))
		}
		for _, p := range pvrs.Items {
			if p.Status.Phase != v1alpha1.PhaseCompleted || p.Spec.Node != "node-b" || p.Spec.RestoreUID != uid || p.Status.SnapshotID != snaps[p.Spec.Volume] {
				t.Errorf("PodVolumeRestore %s: spec %+v status %+v", p.Name, p.Spec, p.Status)
			}
		}
	})

	t.Run("a second restore leaves restored volumes alone", func(t *testing.T) {
		// The pod exists, was filled by the first restore and may have run
		// since: both volumes are skipped with the reason, nothing written.
		kctx, stop := context.WithCancel(ctx)
		defer stop()
		go testenv.FakeKubelet(kctx, dstCS, "app", "node-b", hostDst)
		live := changeRestoredFiles(t, dstCS, hostDst)
		r := v1alpha1.NewRestore("vr-again")
		r.Namespace = ns
		r.Spec.BackupName = "vb"
		must(t, dst.cl.Create(ctx, r))
		r = waitRestore(t, dst, "vr-again", v1alpha1.PhaseCompleted, v1alpha1.PhasePartiallyFailed, v1alpha1.PhaseFailed)
		if pv := r.Status.PodVolumes; r.Status.Phase != v1alpha1.PhaseCompleted || pv == nil || pv.Skipped != 2 || pv.Completed != 0 || r.Status.Warnings < 2 {
			t.Fatalf("second restore %s, pod volumes %+v, warnings %d", r.Status.Phase, r.Status.PodVolumes, r.Status.Warnings)
		}
		pvrs := &v1alpha1.PodVolumeRestoreList{}
		must(t, dst.cl.List(ctx, pvrs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelPodVolumeRestore: "vr-again"}))
		if len(pvrs.Items) != 2 {
			t.Fatalf("%d PodVolumeRestores of vr-again, want 2", len(pvrs.Items))
		}
		for _, p := range pvrs.Items {
			if p.Spec.RunUID == "" || p.Spec.RunUID == p.Spec.RestoreUID || !strings.Contains(p.Status.Message, volumes.ErrAlreadyRestored.Error()) {
				t.Errorf("PodVolumeRestore %s: spec %+v status %+v", p.Name, p.Spec, p.Status)
			}
		}
		for _, f := range live {
			if b, err := os.ReadFile(f); err != nil || string(b) != liveData {
				t.Errorf("%s after the second restore: %q %v, want the application's change", f, b, err)
			}
		}
	})

	t.Run("TTL deletes the volume snapshots too", func(t *testing.T) {
		b := v1alpha1.NewBackup("vb-ttl")
		b.Namespace = ns
		b.Spec.IncludedNamespaces = []string{"app"}
		// The TTL is long so that the backup cannot expire before the
		// snapshots are counted, however slow the machine (a 10 s TTL did, in
		// CI); its expiration is then brought forward in the status, the field
		// the TTL is recorded in at the start.
		b.Spec.TTL = &metav1.Duration{Duration: time.Hour}
		must(t, src.cl.Create(ctx, b))
		b = waitBackup(t, src, "vb-ttl", 60*time.Second, v1alpha1.PhaseCompleted)
		if b.Status.Expiration == nil || b.Status.StartTimestamp == nil || !b.Status.Expiration.Equal(&metav1.Time{Time: b.Status.StartTimestamp.Add(time.Hour)}) {
			t.Fatalf("vb-ttl: expiration %v, start %v, want start + TTL", b.Status.Expiration, b.Status.StartTimestamp)
		}
		repo, err := volumes.Open(ctx, loc, repoPassword, volumes.OpenOptions{})
		must(t, err)
		defer repo.Close(ctx)
		if ids, err := repo.ListSnapshots(ctx, "vb-ttl"); err != nil || len(ids) != 2 {
			t.Fatalf("snapshots of vb-ttl: %v %v", ids, err)
		}
		orig := b.DeepCopy()
		past := metav1.NewTime(time.Now().Add(-time.Second))
		b.Status.Expiration = &past
		must(t, src.cl.Status().Patch(ctx, b, client.MergeFrom(orig)))
		eventually(t, 30*time.Second, "vb-ttl expired", func() error {
			if err := src.cl.Get(ctx, client.ObjectKeyFromObject(b), &v1alpha1.Backup{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		// A fresh handle: this one's manifest cache predates the delete.
		repo, err = volumes.Open(ctx, loc, repoPassword, volumes.OpenOptions{})
		must(t, err)
		defer repo.Close(ctx)
		if ids, err := repo.ListSnapshots(ctx, "vb-ttl"); err != nil || len(ids) != 0 {
			t.Errorf("snapshots of the expired vb-ttl left: %v %v", ids, err)
		}
		if ids, err := repo.ListSnapshots(ctx, "vb"); err != nil || len(ids) != 2 {
			t.Errorf("snapshots of vb (not expired): %v %v", ids, err)
		}
	})

	t.Run("a node without an agent", func(t *testing.T) {
		// Six nodes have no agent, so no heartbeat Lease: their volumes
		// fail once the grace (3s here) has passed for all of them
		// together, not one node after the other (at least 18s) and not
		// after the pod volume timeout (20s); no object is made.
		must(t, src.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lost"}}))
		lost := []string{"node-z", "node-w", "node-v", "node-u", "node-t", "node-s"}
		for i, node := range lost {
			volumePod(t, srcCS, "lost", fmt.Sprintf("app-%d", i), node)
		}
		b := v1alpha1.NewBackup("vb-lost")
		b.Namespace = ns
		b.Spec.IncludedNamespaces = []string{"lost"}
		must(t, src.cl.Create(ctx, b))
		b = waitBackup(t, src, "vb-lost", 60*time.Second, v1alpha1.PhasePartiallyFailed, v1alpha1.PhaseCompleted, v1alpha1.PhaseFailed)
		if b.Status.Phase != v1alpha1.PhasePartiallyFailed || b.Status.PodVolumes == nil || b.Status.PodVolumes.Failed != 2*len(lost) {
			t.Fatalf("backup %s, pod volumes %+v", b.Status.Phase, b.Status.PodVolumes)
		}
		// One grace per node, one after the other, takes at least 6 × 3s,
		// and the timeout 20s: a backup under 15s waited once. The 12s
		// left over the one grace are the backup itself, however loaded
		// the machine is (10s seen at a load average of 14).
		if took := b.Status.CompletionTimestamp.Sub(b.Status.StartTimestamp.Time); took >= 15*time.Second {
			t.Errorf("backup took %s: it waited a grace per node, or for the pod volume timeout", took)
		}
		pvbs := &v1alpha1.PodVolumeBackupList{}
		must(t, src.cl.List(ctx, pvbs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelPodVolumeBackup: "vb-lost"}))
		if len(pvbs.Items) != 0 {
			t.Errorf("%d PodVolumeBackups for a node without an agent", len(pvbs.Items))
		}
		rec := &volumes.BackupRecord{}
		must(t, loc.GetJSON(ctx, store.BackupVolumesKey("vb-lost"), rec))
		if len(rec.Volumes) != 2*len(lost) {
			t.Fatalf("record %+v", rec.Volumes)
		}
		for _, v := range rec.Volumes {
			if !strings.Contains(v.Error, "no node agent runs on node "+v.Node) || !strings.Contains(v.Error, nodeagent.LeaseName(v.Node)) {
				t.Errorf("record error %q", v.Error)
			}
		}
	})

	t.Run("an agent that is alive but never takes the object", func(t *testing.T) {
		// node-y's agent renews its Lease but never finishes the object
		// (here: no agent runs, and the Lease is kept fresh by the test):
		// the Backup gives up after the pod volume timeout, marks the
		// object Failed, and says why.
		must(t, src.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "slow"}}))
		volumePod(t, srcCS, "slow", "db", "node-y")
		hctx, stop := context.WithCancel(ctx)
		defer stop()
		go fakeLease(hctx, src, "node-y")
		b := v1alpha1.NewBackup("vb-slow")
		b.Namespace = ns
		b.Spec.IncludedNamespaces = []string{"slow"}
		must(t, src.cl.Create(ctx, b))
		b = waitBackup(t, src, "vb-slow", 90*time.Second, v1alpha1.PhasePartiallyFailed, v1alpha1.PhaseCompleted, v1alpha1.PhaseFailed)
		if b.Status.Phase != v1alpha1.PhasePartiallyFailed || b.Status.PodVolumes == nil || b.Status.PodVolumes.Failed != 2 {
			t.Fatalf("backup %s, pod volumes %+v", b.Status.Phase, b.Status.PodVolumes)
		}
		pvbs := &v1alpha1.PodVolumeBackupList{}
		must(t, src.cl.List(ctx, pvbs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelPodVolumeBackup: "vb-slow"}))
		if len(pvbs.Items) != 2 {
			t.Fatalf("%d PodVolumeBackups of vb-slow, want 2", len(pvbs.Items))
		}
		for _, p := range pvbs.Items {
			if p.Status.Phase != v1alpha1.PhaseFailed || !strings.Contains(p.Status.Message, "no node agent took it") {
				t.Errorf("PodVolumeBackup %s: %+v", p.Name, p.Status)
			}
		}
	})

	t.Run("a Backup deleted while it runs", func(t *testing.T) {
		// It waits for node-x's agent (alive, never taking the object);
		// deleted, it stops, its Incomplete store folder goes, and store
		// sync does not bring it back.
		must(t, src.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}))
		volumePod(t, srcCS, "gone", "db", "node-x")
		hctx, stop := context.WithCancel(ctx)
		defer stop()
		go fakeLease(hctx, src, "node-x")
		b := v1alpha1.NewBackup("vb-del")
		b.Namespace = ns
		b.Spec.IncludedNamespaces = []string{"gone"}
		must(t, src.cl.Create(ctx, b))
		eventually(t, 30*time.Second, "PodVolumeBackups of vb-del", func() error {
			pvbs := &v1alpha1.PodVolumeBackupList{}
			must(t, src.cl.List(ctx, pvbs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelPodVolumeBackup: "vb-del"}))
			if len(pvbs.Items) != 2 {
				return fmt.Errorf("%d", len(pvbs.Items))
			}
			return nil
		})
		if _, err := loc.GetBackup(ctx, "vb-del"); !errors.Is(err, store.ErrIncomplete) {
			t.Fatalf("running backup in the store: %v", err)
		}
		must(t, src.cl.Delete(ctx, b))
		eventually(t, 10*time.Second, "store folder of vb-del removed", func() error {
			if _, err := loc.GetBackup(ctx, "vb-del"); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%v", err)
			}
			return nil
		})
		// Store sync has run (completely) since: it would have brought
		// the Backup back by then.
		storeSynced(t, src, loc, "vb-del-sync")
		if err := src.cl.Get(ctx, client.ObjectKeyFromObject(b), &v1alpha1.Backup{}); !apierrors.IsNotFound(err) {
			t.Errorf("deleted Backup came back: %v", err)
		}
	})

	t.Run("an object left InProgress by a stopped agent", func(t *testing.T) {
		p := &v1alpha1.PodVolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "left-over"},
			Spec: v1alpha1.PodVolumeBackupSpec{Pod: v1alpha1.PodReference{Namespace: "app", Name: "db"}, Volume: "data", Node: "node-c", BackupName: "gone", Identity: "pvc/app/db-data"}}
		must(t, src.cl.Create(ctx, p))
		p.Status.Phase = v1alpha1.PhaseInProgress
		must(t, src.cl.Status().Update(ctx, p))
		// The agent of node-c starts (again, after a crash) and finds it.
		startAgent(t, src, "node-c", t.TempDir(), repoPassword)
		eventually(t, 30*time.Second, "left-over PodVolumeBackup failed", func() error {
			must(t, src.cl.Get(ctx, client.ObjectKeyFromObject(p), p))
			if p.Status.Phase != v1alpha1.PhaseFailed || !strings.Contains(p.Status.Message, "stopped before it finished") {
				return errPhase(string(p.Status.Phase) + " " + p.Status.Message)
			}
			return nil
		})
	})
}

// TestServerPodVolumesNoPassword: a server without the repository password
// backs up the resources, and each chosen volume fails with the reason.
func TestServerPodVolumesNoPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	ctx := context.Background()
	cs, err := testenv.StartNamedClusters(ctx, t, "src")
	must(t, err)
	s3, err := testenv.StartS3(ctx, t)
	must(t, err)
	must(t, s3.CreateBucket(ctx, "ferry"))
	src := setupSite(t, cs[0], s3, s3.URL("ferry"))
	src.start(t, servermode.Options{})
	must(t, src.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}))
	volumePod(t, kubernetes.NewForConfigOrDie(cs[0].Config), "app", "db", "node-a")
	b := v1alpha1.NewBackup("nopw")
	b.Namespace = ns
	b.Spec.IncludedNamespaces = []string{"app"}
	must(t, src.cl.Create(ctx, b))
	b = waitBackup(t, src, "nopw", 60*time.Second, v1alpha1.PhasePartiallyFailed, v1alpha1.PhaseCompleted, v1alpha1.PhaseFailed)
	if b.Status.Phase != v1alpha1.PhasePartiallyFailed || b.Status.PodVolumes == nil || b.Status.PodVolumes.Failed != 2 || b.Status.Progress.ItemsBackedUp == 0 {
		t.Fatalf("backup %s, items %d, pod volumes %+v", b.Status.Phase, b.Status.Progress.ItemsBackedUp, b.Status.PodVolumes)
	}
	loc, err := store.Open(ctx, s3.URL("ferry"), store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}))
	must(t, err)
	defer loc.Close()
	rec := &volumes.BackupRecord{}
	must(t, loc.GetJSON(ctx, store.BackupVolumesKey("nopw"), rec))
	if len(rec.Volumes) != 2 {
		t.Fatalf("record %+v, want the 2 volumes", rec.Volumes)
	}
	for _, v := range rec.Volumes {
		if !strings.Contains(v.Error, "no volume repository password") {
			t.Errorf("record error %q", v.Error)
		}
	}
}
