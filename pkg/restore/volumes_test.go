package restore

import (
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// TestPlanPodVolumesSharedClaim: a claim mounted by two pods under
// different volume names makes each pod wait on its own volume name (a
// restore once failed creating the second pod: its init container named
// the first pod's volume).
func TestPlanPodVolumesSharedClaim(t *testing.T) {
	pod := func(name, vol string) archive.Item {
		return item("", "pods", "ns", name, `{"kind":"Pod","metadata":{"name":"`+name+`"},"spec":{"volumes":[{"name":"`+vol+`","persistentVolumeClaim":{"claimName":"shared"}}]}}`)
	}
	o := &Options{Name: "r", Spec: v1alpha1.RestoreSpec{BackupName: "b"}, PodVolumes: &PodVolumeOptions{}}
	p, err := buildPlan([]archive.Item{pod("a", "data"), pod("b", "files"), pod("c", "other")}, o)
	if err != nil {
		t.Fatal(err)
	}
	rec := &volumes.BackupRecord{Volumes: []volumes.PodVolumeBackup{{
		PodVolume:      volumes.PodVolume{Namespace: "ns", Pod: "a", Volume: "data", ClaimName: "shared", AlsoMountedBy: []string{"ns/b"}},
		SnapshotResult: &volumes.SnapshotResult{SnapshotID: "s1"},
	}}}
	res := &report.Results{}
	pvr := planPodVolumes(rec, p, o, "uid", res)
	if got := strings.Join(pvr.Volumes["ns/a"], ","); got != "data" {
		t.Errorf("pod a waits on %q, want data", got)
	}
	if got := strings.Join(pvr.Volumes["ns/b"], ","); got != "files" {
		t.Errorf("pod b waits on %q, want files (its own name for the claim)", got)
	}
	if len(pvr.Volumes["ns/c"]) != 0 || len(res.Warnings) != 0 {
		t.Errorf("pod c: %v; warnings %v", pvr.Volumes["ns/c"], res.Warnings)
	}
}
