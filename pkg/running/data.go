package running

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// ClaimChecker walks restored claims in the target and compares each with
// the list its restore kept (helperpod.Helpers.CheckClaims).
type ClaimChecker func(ctx context.Context, claims []volumes.ClaimRef) []volumes.ClaimCheckResult

// CheckData checks the data of every claim a restore wrote (its volume
// records recs, those of claims) through check, and puts the outcome into
// the claims' rows of r: equal to what the restore wrote, which was the
// snapshot's file count and bytes; restored equal, then changed by the
// application (a running pod mounts it writable); or unequal, naming the
// claim and the paths. A claim the restore kept (existingVolumeDataPolicy
// keep) or could not write is reported as such. It returns the section
// recounted.
func CheckData(ctx context.Context, r *report.Running, recs []volumes.PodVolumeRestore, check ClaimChecker) *report.Running {
	if r == nil || r.Skipped != "" {
		return r
	}
	rows := map[volumes.ClaimRef]report.Check{}
	var refs []volumes.ClaimRef
	recOf := map[volumes.ClaimRef]volumes.PodVolumeRestore{}
	for _, rec := range recs {
		if rec.ClaimName == "" {
			continue // a pod's own volume (an emptyDir): no claim to check
		}
		ref := volumes.ClaimRef{Namespace: rec.Namespace, Claim: rec.ClaimName}
		recOf[ref] = rec
		switch {
		case strings.Contains(rec.Error, volumes.ErrKeptExisting.Error()), strings.Contains(rec.Error, volumes.ErrAlreadyRestored.Error()),
			strings.Contains(rec.Error, volumes.ErrNotWaiting.Error()):
			// Skipped on purpose by the restore (live data is kept).
			rows[ref] = dataRow(ref, true, report.DataKept, "", "the restore kept the claim's data as it was, so nothing of the snapshot was written to compare with: "+rec.Error)
		case rec.Error != "":
			rows[ref] = dataRow(ref, false, report.DataNotRestored, "RestoreFailed", rec.Error)
		default:
			refs = append(refs, ref)
		}
	}
	if check == nil {
		for _, ref := range refs {
			rows[ref] = dataRow(ref, true, report.DataNotChecked, "", "no helper pod could walk the claim, so its data was not compared")
		}
	} else if len(refs) > 0 {
		for _, res := range check(ctx, refs) {
			rows[res.ClaimRef] = judge(recOf[res.ClaimRef], res)
		}
		for _, ref := range refs {
			if _, ok := rows[ref]; !ok {
				rows[ref] = dataRow(ref, false, report.DataNotChecked, "CheckFailed", "the check reported nothing for this claim")
			}
		}
	}
	if len(rows) == 0 {
		return r
	}
	checks := make([]report.Check, 0, len(r.Checks)+len(rows))
	for _, c := range r.Checks {
		ref := volumes.ClaimRef{Namespace: c.Namespace, Claim: c.Name}
		if d, ok := rows[ref]; ok && c.Kind == report.KindClaim {
			checks = append(checks, mergeData(c, d))
			delete(rows, ref)
			continue
		}
		checks = append(checks, c)
	}
	for _, d := range rows {
		checks = append(checks, d)
	}
	out := report.NewRunning(checks)
	out.ImagesCheckedFrom, out.DataCheckedBy, out.Waited = r.ImagesCheckedFrom, r.DataCheckedBy, r.Waited
	return out
}

// mergeData puts data row d into claim row c (which says whether the
// claim is bound).
func mergeData(c, d report.Check) report.Check {
	c.Data, c.DataDetail = d.Data, d.DataDetail
	if !d.OK {
		c.OK = false
		if c.Reason == "" {
			c.Reason, c.Message = d.Reason, d.Message
		} else {
			c.Message += "; " + d.Message
		}
	} else if d.Message != "" && c.Message == "" {
		c.Message = d.Message
	}
	c.Outcome += ", " + d.Data
	return c
}

func dataRow(ref volumes.ClaimRef, ok bool, data, reason, msg string) report.Check {
	return report.Check{Kind: report.KindClaim, Resource: "PersistentVolumeClaim", Namespace: ref.Namespace, Name: ref.Claim,
		OK: ok, Outcome: data, Data: data, Reason: reason, Message: msg}
}

// judge is the data row of a claim from its restore record and its check.
func judge(rec volumes.PodVolumeRestore, res volumes.ClaimCheckResult) report.Check {
	ref := res.ClaimRef
	name := "claim " + ref.Namespace + "/" + ref.Claim
	if res.Error != "" {
		return dataRow(ref, false, report.DataNotChecked, "CheckFailed", res.Error)
	}
	now := res.Check
	var want *volumes.Content
	var snap *volumes.SnapshotSummary
	if rec.RestoreResult != nil {
		want, snap = rec.Content, rec.Snapshot
	}
	detail := fmt.Sprintf("%d files, %s, content %s", now.Files, size(now.Bytes), now.Digest)
	if snap != nil {
		detail += fmt.Sprintf("; snapshot %s (root object %s): %d files, %s", snap.ID, snap.RootObject, snap.Files, size(snap.Bytes))
	}
	row := dataRow(ref, true, report.DataEqual, "", "")
	row.DataDetail = detail
	switch {
	case want == nil && now.NoList:
		row.Data, row.Message = report.DataNotChecked, "an earlier restore wrote this claim and kept no list of what it wrote: nothing to compare with"
		return row
	case want != nil && snap != nil && (want.Files != snap.Files || want.Bytes != snap.Bytes):
		row.OK, row.Data, row.Reason = false, report.DataUnequal, "SnapshotMismatch"
		row.Message = fmt.Sprintf("%s held %d files, %s after the restore, where the snapshot holds %d files, %s (files that were in the claim before the restore stay in it)",
			name, want.Files, size(want.Bytes), snap.Files, size(snap.Bytes))
		return row
	}
	equal := len(now.Changed) == 0 && !now.NoList
	if want != nil {
		equal = now.Digest == want.Digest
	}
	if equal {
		return row
	}
	what := "what the restore wrote"
	if want != nil {
		what += " (" + want.Digest + ")"
	}
	changed := ""
	if len(now.Changed) > 0 {
		changed = "; changed since: " + strings.Join(now.Changed, ", ")
	}
	if len(res.WrittenBy) > 0 {
		row.Data = report.DataChangedByApp
		row.Message = fmt.Sprintf("%s holds content %s, not %s, and pod %s mounts it writable%s", name, now.Digest, what, strings.Join(res.WrittenBy, ", "), changed)
		return row
	}
	row.OK, row.Data, row.Reason = false, report.DataUnequal, "ContentChanged"
	row.Message = fmt.Sprintf("%s holds content %s, not %s, and no running pod mounts it writable%s", name, now.Digest, what, changed)
	return row
}

// size is n bytes in binary units ("5.0 MiB").
func size(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, unit := float64(n)/1024, 0
	for f >= 1024 && unit < 4 {
		f, unit = f/1024, unit+1
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTP"[unit])
}
