package restore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/transform"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// restoreClaims writes the backed-up data of each restored claim before
// the workloads that mount it are created (PodVolumeOptions.Claims). What
// a claim holds is read from the claim itself (volumes.RestoreClaim): one
// that holds the done-marker of the backup's snapshot is left as it is,
// whichever run wrote it; any other gets the data, unless
// spec.existingVolumeDataPolicy keeps the data of claims this restore did
// not create. A claim that a pod mounts already is in use and never
// written. A claim whose data cannot be brought (the backup lacks it, its
// storage class is missing, its helper pod fails) is an error that names
// it.
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
	var failed []volumes.PodVolumeRestore // before any helper ran
	fail := func(c volumes.ClaimRestore, msg string) {
		sum.Total++
		sum.Failed++
		results.Errorf("%s", msg)
		v := c.Source
		v.Namespace, v.ClaimName = c.Namespace, c.Claim
		failed = append(failed, volumes.PodVolumeRestore{RestoreTarget: volumes.RestoreTarget{PodVolume: v, SnapshotID: c.SnapshotID}, Error: msg})
	}
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
			fail(c, fmt.Sprintf("%s: its data is not in the backup: %s", c.Key(), v.Error))
			continue
		}
		c.SnapshotID = v.SnapshotID
		if reason, skip, err := checkClaim(ctx, client, o, &c); err != nil {
			fail(c, fmt.Sprintf("%s: %v", c.Key(), err))
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
		return sum, failed
	}
	o.Log.Info("restoring claim data", "claims", len(todo))
	out := po.Claims(ctx, uid, todo, po.OnProgress)
	for _, r := range out {
		countClaim(sum, r, uid, results)
	}
	return sum, append(out, failed...)
}

// countClaim counts the outcome r of a claim's helper in sum, and reports
// what needs saying: errors, a claim kept, a claim an earlier run filled,
// a claim whose earlier data was replaced.
func countClaim(sum *v1alpha1.PodVolumeSummary, r volumes.PodVolumeRestore, uid string, results *report.Results) {
	sum.Total++
	key := "claim " + r.Namespace + "/" + r.ClaimName
	switch {
	case strings.Contains(r.Error, volumes.ErrAlreadyRestored.Error()), strings.Contains(r.Error, volumes.ErrKeptExisting.Error()):
		sum.Skipped++
		results.Warnf("%s", r.Error)
	case r.Error != "":
		sum.Failed++
		results.Errorf("%s", r.Error)
	default:
		sum.Completed++
		res := r.RestoreResult
		if res == nil {
			return
		}
		sum.Bytes += res.Bytes
		sum.Files += res.Files
		if res.AlreadyRestored && res.MarkedBy != uid {
			o := "restore " + res.MarkedBy
			results.Warnf("%s: already held this backup's data (snapshot %s, written by %s); not written again", key, res.SnapshotID, o)
		}
		if len(res.Replaced) > 0 {
			results.Warnf("%s: held the data of snapshot %s before; this backup's snapshot %s was written into it", key, strings.Join(res.Replaced, ", "), res.SnapshotID)
		}
	}
}

// checkClaim says whether claim c in the target may take the data: no pod
// may mount it already, and its storage class must exist, or its helper
// pod would wait forever. A claim this restore did not create keeps its
// data when spec.existingVolumeDataPolicy is keep (c.Keep).
func checkClaim(ctx context.Context, client kubernetes.Interface, o *Options, c *volumes.ClaimRestore) (reason string, skip bool, err error) {
	pvc, err := client.CoreV1().PersistentVolumeClaims(c.Namespace).Get(ctx, c.Claim, metav1.GetOptions{})
	if err != nil {
		return "", false, fmt.Errorf("not in the target, so its data is not restored: %w", err)
	}
	c.Keep = o.Spec.ExistingVolumeDataPolicy == v1alpha1.VolumeDataKeep && pvc.Labels[v1alpha1.LabelRestore] != transform.LabelValue(o.Name)
	if user, err := claimUser(ctx, client, c.Namespace, c.Claim); err != nil {
		return "", false, err
	} else if user != "" {
		return fmt.Sprintf("pod %s/%s mounts the claim already: its data is in use, and the backup's is not written over it", c.Namespace, user), true, nil
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
	return "", false, fmt.Errorf("spec.storageClassName %q: no such StorageClass in the target (map it with spec.storageClassMapping), so the claim cannot bind and its data is not restored", *sc)
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
		cr := it.claimRef
		if cr == nil || !claims[cr.Namespace+"/"+cr.Name] {
			continue
		}
		it.Skip = fmt.Sprintf("the data of its claim %s/%s is restored from the backup into a volume the target provisions", cr.Namespace, cr.Name)
		delete(p.RestoredPVs, it.Name)
		delete(p.PVNames, it.Name)
	}
}

// holdWorkloads returns, for a workload item, why it is not created: a
// claim it mounts (through its pod template, or a StatefulSet's
// volumeClaimTemplates) did not get its data, and a workload started on
// an empty claim would write over what the restore should have brought.
// Run the same restore (or migrate) again once the cause is fixed: a
// PartiallyFailed restore may run again under its name, and the claim is
// filled and the workload created then.
func holdWorkloads(out []volumes.PodVolumeRestore, o *Options) func(*Item) string {
	failed := map[string]string{} // target namespace/claim -> error
	for _, r := range out {
		if r.Error != "" && !strings.Contains(r.Error, volumes.ErrAlreadyRestored.Error()) {
			failed[r.Namespace+"/"+r.ClaimName] = r.Error
		}
	}
	// A claim kept (existingVolumeDataPolicy keep) does not hold the
	// backup's data either: its workloads wait, as for a failed claim.
	if len(failed) == 0 {
		return func(*Item) string { return "" }
	}
	return func(it *Item) string {
		ns := o.mapNamespace(it.Namespace)
		for _, c := range mountedClaims(it) {
			if why, bad := failed[ns+"/"+c]; bad {
				if strings.Contains(why, volumes.ErrKeptExisting.Error()) {
					return fmt.Sprintf("not created: its claim %s/%s was already in the target without this backup's data, and existingVolumeDataPolicy keep kept it; restore with policy write to bring the data, or remove the claim", ns, c)
				}
				return fmt.Sprintf("not created: the data of its claim %s/%s was not restored (see the restore's errors); run the same restore again once that is fixed", ns, c)
			}
		}
		return ""
	}
}

// mountedClaims lists the claims a workload item's pods mount: those of
// its pod spec's volumes, and for a StatefulSet the claims of its
// volumeClaimTemplates (<template>-<name>-<ordinal>).
func mountedClaims(it *Item) []string {
	path, ok := kube.PodSpecPaths[it.GroupResource]
	if !ok {
		return nil
	}
	data, err := it.Read()
	if err != nil {
		return nil
	}
	var obj map[string]any
	if json.Unmarshal(data, &obj) != nil {
		return nil
	}
	var out []string
	vols, _, _ := unstructured.NestedSlice(obj, append(append([]string{}, path...), "volumes")...)
	for _, v := range vols {
		m, _ := v.(map[string]any)
		if c, ok, _ := unstructured.NestedString(m, "persistentVolumeClaim", "claimName"); ok && c != "" {
			out = append(out, c)
		}
	}
	if it.GroupResource == "statefulsets.apps" {
		replicas := int64(1) // the default
		if r, ok, _ := unstructured.NestedFieldNoCopy(obj, "spec", "replicas"); ok {
			if f, isNum := r.(float64); isNum { // encoding/json's numbers
				replicas = int64(f)
			}
		}
		tmpls, _, _ := unstructured.NestedSlice(obj, "spec", "volumeClaimTemplates")
		for _, tm := range tmpls {
			m, _ := tm.(map[string]any)
			name, _, _ := unstructured.NestedString(m, "metadata", "name")
			for i := int64(0); i < replicas && name != ""; i++ {
				out = append(out, fmt.Sprintf("%s-%s-%d", name, it.Name, i))
			}
		}
	}
	return out
}

// claimUser returns a pod (not one of ferry's helpers) in ns that mounts
// claim, or "".
func claimUser(ctx context.Context, client kubernetes.Interface, ns, claim string) (string, error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "!" + v1alpha1.LabelHelperRun})
	if err != nil {
		return "", fmt.Errorf("listing the pods that may mount it: %w", err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				return p.Name, nil
			}
		}
	}
	return "", nil
}
