package volumes

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/volumes/volumetest"
)

// TestRestoreRemovesStaleStaging: a restore killed mid-way (its helper pod
// deleted) leaves its staging folder in the volume; the next restore
// removes it, and only the snapshot's data is left.
func TestRestoreRemovesStaleStaging(t *testing.T) {
	ctx := context.Background()
	loc, _ := openTestStore(t)
	src := t.TempDir()
	if _, err := volumetest.MakeTree(src, volumetest.TreeOptions{SmallFiles: 20, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	r := openTestRepo(t, loc, true)
	res, err := r.Snapshot(ctx, src, "pvc/ns/k", map[string]string{TagBackup: "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	stale := filepath.Join(dst, v1alpha1.DoneMarkerDir, "restore-dead00000000.partial")
	if err := os.MkdirAll(filepath.Join(stale, "half"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(ctx, res.SnapshotID, dst, "r2", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the killed restore's staging folder is still there: %v", err)
	}
	if diffs, err := volumetest.Compare(src, dst, v1alpha1.DoneMarkerDir); err != nil || len(diffs) > 0 {
		t.Errorf("restored differently: %v %v", err, diffs)
	}
}

// TestSelectPrefersRunningPod: a claim that a finished Job pod and a
// running pod both mount is read where the running pod is (its node), the
// finished one listed as also mounting it; alone, a finished pod's claim
// is kept without a node only for helper pods (unmountedClaims).
func TestSelectPrefersRunningPod(t *testing.T) {
	claim := vol("data", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}})
	done := pod("a", "a-job", nil, claim)
	done.Status.Phase = corev1.PodSucceeded
	done.Spec.NodeName = "n1"
	run := pod("a", "b-app", nil, claim)
	run.Status.Phase = corev1.PodRunning
	run.Spec.NodeName = "n2"
	vols, _ := Select([]corev1.Pod{done, run}, true, true)
	if len(vols) != 1 || vols[0].Pod != "b-app" || vols[0].Node != "n2" || len(vols[0].AlsoMountedBy) != 1 || vols[0].AlsoMountedBy[0] != "a/a-job" {
		t.Errorf("volumes %+v, want the claim read through the running pod b-app on n2", vols)
	}
	vols, _ = Select([]corev1.Pod{done}, true, true)
	if len(vols) != 1 || vols[0].Node != "" || vols[0].PodUID != "" {
		t.Errorf("finished pod's claim for helper pods: %+v, want it with no node", vols)
	}
	if vols, skipped := Select([]corev1.Pod{done}, true, false); len(vols) != 0 || len(skipped) != 1 {
		t.Errorf("finished pod's claim without helper pods: %+v, skipped %+v; want it skipped", vols, skipped)
	}
}
