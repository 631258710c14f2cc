package volumes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// ResolveClaims sets PVName on each claim-backed volume from its
// PersistentVolumeClaim's spec.volumeName. A claim that cannot be read is
// left unresolved: HostPath then reports it.
func ResolveClaims(ctx context.Context, client kubernetes.Interface, vols []PodVolume) {
	cache := map[string]string{}
	for i := range vols {
		v := &vols[i]
		if v.ClaimName == "" {
			continue
		}
		key := v.Namespace + "/" + v.ClaimName
		pv, ok := cache[key]
		if !ok {
			pvc, err := client.CoreV1().PersistentVolumeClaims(v.Namespace).Get(ctx, v.ClaimName, metav1.GetOptions{})
			if err == nil {
				pv = pvc.Spec.VolumeName
			}
			cache[key] = pv
		}
		v.PVName = pv
	}
}

// ErrNotWaiting is reported for a target pod that already exists and does
// not wait for volume data (no ferry-restore-wait init container): its
// volume is in use, so nothing is written into it.
var ErrNotWaiting = errors.New("pod does not wait for volume data")

// Targets turns a backup's volume records into restore targets in the
// target cluster: each backed-up volume goes to the restored pod of the
// same name in namespace mapNamespace(namespace), and for a claim also to
// the pods in AlsoMountedBy (marker only). It waits up to wait for each
// pod to exist and each claim to be bound, to learn the pod's UID and the
// claim's PersistentVolume. Volumes that failed in the backup, and pods or
// claims that never appear, come back as failed restores, as does a pod
// that does not wait for its data, or waits for another backup's
// (ErrNotWaiting). Each target's RestoreUID is the done-marker its pod
// waits for.
func Targets(ctx context.Context, client kubernetes.Interface, backup string, rec *BackupRecord, mapNamespace func(string) string, wait time.Duration) ([]RestoreTarget, []PodVolumeRestore) {
	var targets []RestoreTarget
	var failed []PodVolumeRestore
	deadline := time.Now().Add(wait)
	for _, b := range rec.Volumes {
		if b.Error != "" || b.SnapshotResult == nil {
			continue // the backup has no data for it; its error is in the backup
		}
		pods := append([]string{b.Namespace + "/" + b.Pod}, b.AlsoMountedBy...)
		for i, key := range pods {
			ns, name, ok := strings.Cut(key, "/")
			if !ok {
				ns, name = "", key
			}
			t := RestoreTarget{PodVolume: b.PodVolume, SnapshotID: b.SnapshotID, MarkerOnly: i > 0}
			t.AlsoMountedBy = nil
			t.Namespace, t.Pod = mapNamespace(ns), name
			pod, err := waitPod(ctx, client, t.Namespace, t.Pod, deadline)
			if err != nil {
				failed = append(failed, PodVolumeRestore{RestoreTarget: t, Error: err.Error()})
				continue
			}
			t.PodUID = string(pod.UID)
			// Only a pod that waits for its data gets it: writing into the
			// volume of a pod that runs would change live data under it.
			uid := pod.Annotations[v1alpha1.AnnotationRestoreUID]
			if uid == "" || !slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == v1alpha1.RestoreWaitContainer }) {
				failed = append(failed, PodVolumeRestore{RestoreTarget: t, Error: fmt.Sprintf("%v: pod %s/%s exists and does not wait for its volume data (it was not made by a ferry restore), so its running volume is not overwritten", ErrNotWaiting, t.Namespace, t.Pod)})
				continue
			}
			if other := pod.Annotations[v1alpha1.AnnotationRestoreBackup]; other != backup {
				failed = append(failed, PodVolumeRestore{RestoreTarget: t, Error: fmt.Sprintf("%v: pod %s/%s waits for the data of backup %s, not of %s, so it is not written", ErrNotWaiting, t.Namespace, t.Pod, other, backup)})
				continue
			}
			// An earlier restore of this backup may have made it wait for
			// its own done-marker: write that one.
			t.RestoreUID = uid
			if t.ClaimName != "" {
				// Another pod mounting the same claim may call it otherwise
				// (the backup's pod too, when a restore left it out).
				for _, v := range pod.Spec.Volumes {
					if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == t.ClaimName {
						t.Volume = v.Name
						break
					}
				}
			}
			if t.ClaimName != "" {
				t.PVName, err = waitBound(ctx, client, t.Namespace, t.ClaimName, deadline)
				if err != nil {
					failed = append(failed, PodVolumeRestore{RestoreTarget: t, Error: err.Error()})
					continue
				}
			}
			targets = append(targets, t)
		}
	}
	return targets, failed
}

func waitPod(ctx context.Context, client kubernetes.Interface, ns, name string, deadline time.Time) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			pod = p
			return true, nil
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return false, fmt.Errorf("pod %s/%s in the target: %w", ns, name, err)
		}
		return false, nil
	})
	return pod, err
}

func waitBound(ctx context.Context, client kubernetes.Interface, ns, name string, deadline time.Time) (string, error) {
	var pv string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && pvc.Spec.VolumeName != "" && pvc.Status.Phase == corev1.ClaimBound {
			pv = pvc.Spec.VolumeName
			return true, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("claim %s/%s in the target: %w", ns, name, err)
		}
		if time.Now().After(deadline) {
			if err != nil {
				return false, fmt.Errorf("claim %s/%s in the target: %w", ns, name, err)
			}
			return false, fmt.Errorf("claim %s/%s in the target is %s, not bound to a volume", ns, name, pvc.Status.Phase)
		}
		return false, nil
	})
	return pv, err
}
