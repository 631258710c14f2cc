package running

import (
	"context"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/volumes"
)

func claimRec(name string, content *volumes.Content, snap *volumes.SnapshotSummary, errMsg string) volumes.PodVolumeRestore {
	r := volumes.PodVolumeRestore{Error: errMsg}
	r.Namespace, r.ClaimName, r.Pod, r.Volume = "app", name, "db-0", "data"
	r.RestoreTarget.SnapshotID = "k" + name
	if content != nil {
		r.RestoreResult = &volumes.RestoreResult{Content: content, Snapshot: snap}
	}
	return r
}

// Every outcome of a claim's data check: what the restore wrote and what
// the claim holds at the check.
func TestCheckData(t *testing.T) {
	wrote := &volumes.Content{Files: 3, Bytes: 300, Digest: "sha256:aaa"}
	snap := &volumes.SnapshotSummary{ID: "kequal", RootObject: "kroot", Files: 3, Bytes: 300}
	recs := []volumes.PodVolumeRestore{
		claimRec("equal", wrote, snap, ""),
		claimRec("app-wrote", wrote, snap, ""),
		claimRec("tampered", wrote, snap, ""),
		claimRec("extra", &volumes.Content{Files: 4, Bytes: 310, Digest: "sha256:bbb"}, snap, ""),
		claimRec("kept", nil, nil, "claim app/kept: "+volumes.ErrKeptExisting.Error()),
		claimRec("broken", nil, nil, "claim app/broken: restoring snapshot kbroken: no space left on device"),
		claimRec("unreadable", wrote, snap, ""),
		claimRec("live", nil, nil, "volume app/db-0/data: "+volumes.ErrAlreadyRestored.Error()+": it has the done-marker of restore r0"),
	}
	emptyDir := volumes.PodVolumeRestore{}
	emptyDir.Namespace, emptyDir.Pod, emptyDir.Volume = "app", "web-0", "cache"
	recs = append(recs, emptyDir)
	var asked []string
	checker := func(_ context.Context, refs []volumes.ClaimRef) []volumes.ClaimCheckResult {
		var out []volumes.ClaimCheckResult
		for _, ref := range refs {
			asked = append(asked, ref.Claim)
			res := volumes.ClaimCheckResult{ClaimRef: ref, Check: &volumes.ContentCheck{Content: *wrote}}
			switch ref.Claim {
			case "app-wrote":
				res.Check = &volumes.ContentCheck{Content: volumes.Content{Files: 4, Bytes: 400, Digest: "sha256:ccc"}, Changed: []string{"wal/0001 (added)"}}
				res.WrittenBy = []string{"db-0"}
			case "tampered":
				res.Check = &volumes.ContentCheck{Content: volumes.Content{Files: 3, Bytes: 300, Digest: "sha256:ddd"}, Changed: []string{"table.dat (changed)"}}
			case "extra":
				res.Check = &volumes.ContentCheck{Content: volumes.Content{Files: 4, Bytes: 310, Digest: "sha256:bbb"}}
			case "unreadable":
				res.Check, res.Error = nil, "claim app/unreadable: the helper pod could not be scheduled"
			}
			out = append(out, res)
		}
		return out
	}
	in := report.NewRunning([]report.Check{{Kind: report.KindClaim, Resource: "PersistentVolumeClaim", Namespace: "app", Name: "equal", OK: true, Outcome: "bound", Bound: true},
		{Kind: report.KindClaim, Resource: "PersistentVolumeClaim", Namespace: "app", Name: "tampered", OK: true, Outcome: "bound", Bound: true}})
	r := CheckData(context.Background(), in, recs, checker)
	if strings.Join(asked, ",") != "equal,app-wrote,tampered,extra,unreadable" {
		t.Errorf("checked %v: a kept or failed claim, or an emptyDir, is not walked", asked)
	}
	for name, want := range map[string]struct {
		ok          bool
		data, inMsg string
	}{
		"equal":      {true, report.DataEqual, ""},
		"app-wrote":  {true, report.DataChangedByApp, "pod db-0 mounts it writable; changed since: wal/0001 (added)"},
		"tampered":   {false, report.DataUnequal, "claim app/tampered holds content sha256:ddd, not what the restore wrote (sha256:aaa), and no running pod mounts it writable; changed since: table.dat (changed)"},
		"extra":      {false, report.DataUnequal, "held 4 files, 310 B after the restore, where the snapshot holds 3 files, 300 B"},
		"kept":       {true, report.DataKept, "existingVolumeDataPolicy keep"},
		"live":       {true, report.DataKept, "volume already holds restored data"},
		"broken":     {false, report.DataNotRestored, "no space left on device"},
		"unreadable": {false, report.DataNotChecked, "could not be scheduled"},
	} {
		c := row(t, r, name)
		if c.OK != want.ok || c.Data != want.data || !strings.Contains(c.Message, want.inMsg) {
			t.Errorf("%s: %+v, want OK %v, data %q, message with %q", name, c, want.ok, want.data, want.inMsg)
		}
	}
	if c := row(t, r, "equal"); c.Outcome != "bound, equal" || !strings.Contains(c.DataDetail, "snapshot kequal (root object kroot): 3 files, 300 B") {
		t.Errorf("equal: the bound row carries the data outcome and the snapshot: %+v", c)
	}
	c := r.Counts
	if c.Claims != 8 || c.ClaimsWithData != 6 || c.ClaimsEqual != 1 || c.ClaimsChangedByApp != 1 || c.ClaimsNotChecked != 1 || c.Failed != 4 {
		t.Errorf("counts %+v", c)
	}
	if c.ClaimsBound != 2 {
		t.Errorf("a bound claim whose data is unequal is still bound: %+v", c)
	}
	if h := r.Headline(); !strings.Contains(h, "2 of 8 claims bound, 2 of 6 restored claims equal to what the restore wrote (1 since changed by its application, 1 not checked)") {
		t.Errorf("headline %q", h)
	}
}

// Without helper pods the claims are said to be unchecked, not equal.
func TestCheckDataNoChecker(t *testing.T) {
	wrote := &volumes.Content{Files: 1, Bytes: 1, Digest: "sha256:a"}
	r := CheckData(context.Background(), report.NewRunning(nil), []volumes.PodVolumeRestore{claimRec("c", wrote, nil, "")}, nil)
	if c := row(t, r, "c"); !c.OK || c.Data != report.DataNotChecked {
		t.Errorf("%+v, want not checked", c)
	}
	if r.Counts.ClaimsEqual != 0 {
		t.Errorf("an unchecked claim is not counted equal: %+v", r.Counts)
	}
	skipped := &report.Running{Skipped: "spec.verifyRuntime.skip is set"}
	if got := CheckData(context.Background(), skipped, []volumes.PodVolumeRestore{claimRec("c", wrote, nil, "")}, nil); got != skipped || len(got.Checks) != 0 {
		t.Errorf("a skipped section stays skipped: %+v", got)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 5243030: "5.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}
