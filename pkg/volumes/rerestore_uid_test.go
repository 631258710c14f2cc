package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// A pod that restore r1 of backup b1 made, whose volume r1 filled and
// whose application has written since: a later restore r2 of b1 leaves
// the live data alone and says so (ErrAlreadyRestored, a skip), where it
// once reported the volume restored although it wrote nothing; a restore
// of another backup does not target the pod at all.
func TestLaterRestoreOfARestoredPod(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	r := openTestRepo(t, loc, true)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("backed up"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(ctx, src, "pod/app/web/cache", map[string]string{TagBackup: "b1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pods := t.TempDir()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", UID: "pu", Annotations: map[string]string{v1alpha1.AnnotationRestoreUID: "r1", v1alpha1.AnnotationRestoreBackup: "b1"}},
		Spec:       corev1.PodSpec{InitContainers: []corev1.Container{{Name: v1alpha1.RestoreWaitContainer}}},
	}
	dir := filepath.Join(pods, "pu", "volumes", "kubernetes.io~empty-dir", "cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(ctx, snap.SnapshotID, dir, "r1", nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("LIVE"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &BackupRecord{Volumes: []PodVolumeBackup{{PodVolume: PodVolume{Namespace: "app", Pod: "web", Volume: "cache", Identity: "pod/app/web/cache"}, SnapshotResult: snap}}}
	same := func(s string) string { return s }

	targets, failed := Targets(ctx, fake.NewClientset(pod), "b1", rec, same, time.Second)
	if len(failed) != 0 || len(targets) != 1 {
		t.Fatalf("targets %+v failed %+v", targets, failed)
	}
	out := r.RestorePodVolumes(ctx, pods, "r2", targets, time.Second, nil)
	if len(out) != 1 || !strings.Contains(out[0].Error, ErrAlreadyRestored.Error()) || !strings.Contains(out[0].Error, "restore r1") {
		t.Fatalf("restore r2 of b1: %+v", out)
	}
	// A re-run of r1 itself is fine: nothing to do, no error.
	out = r.RestorePodVolumes(ctx, pods, "r1", targets, time.Second, nil)
	if len(out) != 1 || out[0].Error != "" || out[0].RestoreResult == nil || !out[0].AlreadyRestored {
		t.Fatalf("re-run of r1: %+v", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "LIVE" {
		t.Fatalf("live data overwritten: %q", b)
	}
	_, failed = Targets(ctx, fake.NewClientset(pod), "b2", rec, same, time.Second)
	if len(failed) != 1 || !strings.Contains(failed[0].Error, "waits for the data of backup b1, not of b2") {
		t.Fatalf("restore of b2: %+v", failed)
	}
}

// Pods a and b share claim c; restore r1 filled it through a and gave b
// its marker. A later restore r2 of the same backup skips both (it once
// failed b: "the data of claim was not restored"), and a b created again
// that waits for r2's marker gets it, and starts on the claim's data.
func TestLaterRestoreOfASharedClaim(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	r := openTestRepo(t, loc, true)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("backed up"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(ctx, src, "pvc/app/c", map[string]string{TagBackup: "b1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pods := t.TempDir()
	target := func(pod, uid, marker string, markerOnly bool) RestoreTarget {
		dir := filepath.Join(pods, uid, "volumes", "kubernetes.io~nfs", "pv")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return RestoreTarget{PodVolume: PodVolume{Namespace: "app", Pod: pod, PodUID: uid, Volume: "data", ClaimName: "c", PVName: "pv", Identity: "pvc/app/c"},
			SnapshotID: snap.SnapshotID, MarkerOnly: markerOnly, RestoreUID: marker}
	}
	a, b := target("a", "ua", "r1", false), target("b", "ub", "r1", true)
	out := r.RestorePodVolumes(ctx, pods, "r1", []RestoreTarget{a, b}, time.Second, nil)
	if len(out) != 2 {
		t.Fatalf("r1: %d outcomes for 2 targets: %+v", len(out), out)
	}
	for _, o := range out {
		if o.Error != "" {
			t.Fatalf("r1: %+v", o)
		}
	}
	// The application changes the claim's data through a.
	live := filepath.Join(out[0].Path, "f")
	if b, err := os.ReadFile(live); err != nil || string(b) != "backed up" {
		t.Fatalf("restored through a: %q %v", b, err)
	}
	if err := os.WriteFile(live, []byte("LIVE"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = r.RestorePodVolumes(ctx, pods, "r2", []RestoreTarget{a, b}, time.Second, nil)
	if len(out) != 2 {
		t.Fatalf("r2: %d outcomes for 2 targets: %+v", len(out), out)
	}
	for _, o := range out {
		if !strings.Contains(o.Error, ErrAlreadyRestored.Error()) {
			t.Errorf("r2, pod %s: %q, want a skip (%v)", o.Pod, o.Error, ErrAlreadyRestored)
		}
	}
	b2 := target("b", "ub2", "r2", true) // b, created again by r2
	out = r.RestorePodVolumes(ctx, pods, "r2", []RestoreTarget{a, b2}, time.Second, nil)
	if len(out) != 2 || out[1].Error != "" {
		t.Fatalf("the new b: %+v", out)
	}
	if b, err := os.ReadFile(live); err != nil || string(b) != "LIVE" {
		t.Errorf("the claim's data after r2: %q %v, want the application's change", b, err)
	}
	if _, err := os.Stat(MarkerPath(out[1].Path, "r2")); err != nil {
		t.Fatalf("the new b's marker: %v", err)
	}
}
