package migration

import (
	"context"
	"errors"
	"fmt"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/running"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// CheckRunning is the running section of verification v of restore
// ropts in target (see checkRunning), for a verification run outside
// VerifyRestore (ferry verify): the backup is read from the location.
func CheckRunning(ctx context.Context, target *kube.Cluster, loc *store.Location, ropts restore.Options, v *report.Verification) *report.Running {
	b, _ := loc.GetBackup(ctx, ropts.Spec.BackupName) // nil: the images' digests are not compared
	return checkRunning(ctx, target, loc, ropts, b, v)
}

// checkRunning is the running section of verification v of a restore
// (running.Check): its workloads, Services, claims and images in the
// target, unless spec.verifyRuntime.skip leaves them out. The images are
// resolved from where this process runs, with the restore's registry
// options, against the digests backup b recorded.
func checkRunning(ctx context.Context, target *kube.Cluster, loc *store.Location, ropts restore.Options, b *v1alpha1.Backup, v *report.Verification) *report.Running {
	rt := ropts.Spec.VerifyRuntime
	if rt != nil && rt.Skip {
		return &report.Running{Skipped: "spec.verifyRuntime.skip is set: the objects were compared, and whether the workloads run was not checked"}
	}
	o := running.Options{Images: images.NewCopier(ropts.Images), Log: ropts.Log}
	if rt != nil && rt.Timeout != nil {
		o.Timeout = rt.Timeout.Duration
	}
	if b != nil {
		rec, err := images.LoadRecord(ctx, loc, b)
		if err != nil && !errors.Is(err, images.ErrNoImages) {
			v.Warnings = append(v.Warnings, fmt.Sprintf("runtime checks: the backup's images record: %v (image digests are not compared with it)", err))
		}
		if rec != nil {
			o.Digests = map[string]bool{}
			for _, d := range rec.Digests() {
				o.Digests[d] = true
			}
			// What the restore's referrer filter chose: the check lists with it.
			o.Referrers = map[string][]images.Referrer{}
			for d, refs := range rec.Referrers() {
				for _, r := range refs {
					if ropts.Images.Referrers.Wants(r.ArtifactType) {
						o.Referrers[d] = append(o.Referrers[d], r)
					}
				}
			}
		}
	}
	r := running.Check(ctx, target, running.Objects(v.Items), o)
	return checkData(ctx, loc, ropts, r, v)
}

// checkData adds the data check of the claims restore ropts wrote (its
// volume records in loc) to running section r, through the restore's
// helper pods (PodVolumeOptions.CheckClaims); without them the claims'
// data is said to be unchecked.
func checkData(ctx context.Context, loc *store.Location, ropts restore.Options, r *report.Running, v *report.Verification) *report.Running {
	if r == nil || r.Skipped != "" {
		return r
	}
	var recs []volumes.PodVolumeRestore
	err := loc.GetJSON(ctx, store.RestoreVolumesKey(ropts.Name), &recs)
	switch {
	case errors.Is(err, store.ErrNotFound) && ropts.Name == "verify-"+ropts.Spec.BackupName:
		// ferry verify without --restore: no restore to take records from.
		r.DataCheckedBy = "no restore was named, so the claims' data was not compared (the data check reads a restore's volume records)"
		return r
	case errors.Is(err, store.ErrNotFound):
		return r // the restore wrote no volume data
	case err != nil:
		v.Warnings = append(v.Warnings, fmt.Sprintf("runtime checks: the restore's volume records: %v (the claims' data was not checked)", err))
		return r
	}
	var check running.ClaimChecker
	if pv := ropts.PodVolumes; pv != nil && pv.CheckClaims != nil {
		check = pv.CheckClaims
	} else {
		r.DataCheckedBy = "no helper pods were given to this verification, so the claims' data was not checked"
	}
	return running.CheckData(ctx, r, recs, check)
}

// firstFailure names the first failed runtime check and why.
func firstFailure(r *report.Running) string {
	f := r.Failures()
	if len(f) == 0 {
		return ""
	}
	c := f[0]
	name := c.Name
	if c.Namespace != "" {
		name = c.Namespace + "/" + c.Name
	}
	kind := c.Resource
	if kind == "" {
		kind = c.Kind
	}
	return fmt.Sprintf("%s %s %s: %s: %s", kind, name, c.Outcome, c.Reason, c.Message)
}
