package backup

import (
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/volumes"
)

// TestUnbound: a claim not bound to a volume (a Pending pod's
// WaitForFirstConsumer claim) is skipped with the reason, not handed to a
// helper pod, whose mount would make the source provision a volume.
func TestUnbound(t *testing.T) {
	vols := []volumes.PodVolume{
		{Namespace: "a", Pod: "p", Volume: "data", Type: "persistentVolumeClaim", ClaimName: "pending"},
		{Namespace: "a", Pod: "p", Volume: "db", Type: "persistentVolumeClaim", ClaimName: "bound", PVName: "pv-1"},
		{Namespace: "a", Pod: "p", Volume: "cache", Type: "emptyDir"},
	}
	keep, skipped := unbound(vols, nil)
	if len(keep) != 2 || keep[0].ClaimName != "bound" || keep[1].Volume != "cache" {
		t.Errorf("kept %+v", keep)
	}
	if len(skipped) != 1 || skipped[0].Volume != "data" || !strings.Contains(skipped[0].Reason, "claim a/pending is not bound") {
		t.Errorf("skipped %+v", skipped)
	}
}
