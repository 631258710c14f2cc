package restore

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/transform"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// restoreClaims writes the backed-up data of each restored claim before
// the workloads that mount it are created (PodVolumeOptions.Claims). Only
// claims that this restore created get data: a claim that was already in
// the target holds live data, which is kept. A claim whose data cannot be
// brought (the backup lacks it, its storage class is missing, its helper
// pod fails) is an error that names it.
func restoreClaims(ctx context.Context, client kubernetes.Interface, rec *volumes.BackupRecord, p *Plan, o *Options, uid string, results *report.Results) (*v1alpha1.PodVolumeSummary, []volumes.PodVolumeRestore) {
	po := o.PodVolumes
	inPlan := map[string]bool{} // source namespace/name of restored claims
	for _, it := range p.Items {
		if it.GroupResource == "persistentvolumeclaims" && it.Skip == "" {
			inPlan[it.Namespace+"/"+it.Name] = true
		}
	}
	sum := &v1alpha1.PodVolumeSummary{}
	var todo []volumes.ClaimRestore
	seen := map[string]bool{}
	for _, v := range rec.Volumes {
		if !po.byClaim(v.PodVolume) || seen[v.Identity] {
			continue
		}
		seen[v.Identity] = true
		src := v.Namespace + "/" + v.ClaimName
		c := volumes.ClaimRestore{Namespace: o.mapNamespace(v.Namespace), Claim: v.ClaimName, Source: v.PodVolume}
		switch {
		case !inPlan[src]:
			results.Warnf("claim %s: not restored, so neither is its data", src)
			continue
		case v.Error != "" || v.SnapshotResult == nil:
			sum.Total++
			sum.Failed++
			results.Errorf("%s: its data is not in the backup: %s", c.Key(), v.Error)
			continue
		}
		c.SnapshotID = v.SnapshotID
		if reason, skip, err := checkClaim(ctx, client, o, c); err != nil {
			sum.Total++
			sum.Failed++
			results.Errorf("%s: %v", c.Key(), err)
			continue
		} else if skip {
			sum.Total++
			sum.Skipped++
			results.Warnf("%s: %s", c.Key(), reason)
			continue
		}
		todo = append(todo, c)
	}
	if len(todo) == 0 {
		return sum, nil
	}
	o.Log.Info("restoring claim data", "claims", len(todo))
	out := po.Claims(ctx, uid, todo, po.OnProgress)
	for _, r := range out {
		sum.Total++
		switch {
		case strings.Contains(r.Error, volumes.ErrAlreadyRestored.Error()):
			sum.Skipped++
			results.Warnf("%s", r.Error)
		case r.Error != "":
			sum.Failed++
			results.Errorf("%s", r.Error)
		default:
			sum.Completed++
			if r.RestoreResult != nil {
				sum.Bytes += r.Bytes
				sum.Files += r.Files
			}
		}
	}
	return sum, out
}

// checkClaim says whether claim c in the target may take the data: it must
// have been created by this restore (or an earlier run of it), and its
// storage class must exist, or its helper pod would wait forever.
func checkClaim(ctx context.Context, client kubernetes.Interface, o *Options, c volumes.ClaimRestore) (reason string, skip bool, err error) {
	pvc, err := client.CoreV1().PersistentVolumeClaims(c.Namespace).Get(ctx, c.Claim, metav1.GetOptions{})
	if err != nil {
		return "", false, fmt.Errorf("not in the target, so its data is not restored: %w", err)
	}
	if pvc.Labels[v1alpha1.LabelRestore] != transform.LabelValue(o.Name) {
		return "the claim was already in the target (not created by this restore): its data is kept, and the backup's is not written", true, nil
	}
	if pvc.Spec.VolumeName != "" || pvc.Status.Phase == corev1.ClaimBound {
		return "", false, nil // bound to a volume already
	}
	sc := pvc.Spec.StorageClassName
	if sc != nil && *sc == "" {
		return "", false, nil // a static volume binds it
	}
	classes, err := client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return "", false, nil // cannot check; the helper pod's deadline still holds
		}
		return "", false, err
	}
	for _, cl := range classes.Items {
		if sc != nil && cl.Name == *sc {
			return "", false, nil
		}
		if sc == nil && cl.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			return "", false, nil
		}
	}
	if sc == nil {
		return "", false, fmt.Errorf("spec.storageClassName is not set and the target has no default StorageClass, so the claim cannot bind")
	}
	return "", false, fmt.Errorf("spec.storageClassName %q: no such StorageClass in the target (map it with spec.storageClassMapping, --storage-class-mappings OLD:NEW), so the claim cannot bind and its data is not restored", *sc)
}

// skipDataPVs leaves out the PersistentVolumes whose claim's data the
// restore writes from the backup (as Velero does for file-system backups):
// the target provisions a new volume for the claim instead. Restoring the
// PV would bind the claim to the source's disk (or, for a shared file
// system, write the backup's data over the source's).
func skipDataPVs(p *Plan, rec *volumes.BackupRecord, po *PodVolumeOptions) {
	claims := map[string]bool{}
	for _, v := range rec.Volumes {
		if po.byClaim(v.PodVolume) && v.SnapshotResult != nil {
			claims[v.Namespace+"/"+v.ClaimName] = true
		}
	}
	for _, it := range p.Items {
		if it.GroupResource != "persistentvolumes" || it.Skip != "" {
			continue
		}
		cr := it.peek.Spec.ClaimRef
		if cr == nil || !claims[cr.Namespace+"/"+cr.Name] {
			continue
		}
		it.Skip = fmt.Sprintf("the data of its claim %s/%s is restored from the backup into a volume the target provisions", cr.Namespace, cr.Name)
		delete(p.RestoredPVs, it.Name)
		delete(p.PVNames, it.Name)
	}
}
