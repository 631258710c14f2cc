package helperpod

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/volumes"
)

// claimUser is a running pod that mounts a claim.
type claimUser struct {
	pod      corev1.Pod
	volume   string // the pod's volume name for the claim
	writable bool
}

// CheckClaims walks each restored claim through a helper pod that mounts
// it read-only (on the node of a pod that uses it, if one does; a
// ReadWriteOncePod claim in use is read in that node's kubelet pods
// directory) and compares it with the list its restore kept
// (volumes.CheckContent), Parallel at a time.
func (h *Helpers) CheckClaims(ctx context.Context, claims []volumes.ClaimRef) []volumes.ClaimCheckResult {
	h.defaults()
	out := make([]volumes.ClaimCheckResult, len(claims))
	h.each(len(claims), func(i int) {
		out[i] = h.checkClaim(ctx, claims[i])
	})
	return out
}

func (h *Helpers) checkClaim(ctx context.Context, c volumes.ClaimRef) volumes.ClaimCheckResult {
	out := volumes.ClaimCheckResult{ClaimRef: c}
	key := fmt.Sprintf("claim %s/%s", c.Namespace, c.Claim)
	pvc, err := h.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Get(ctx, c.Claim, metav1.GetOptions{})
	if err != nil {
		out.Error = key + ": " + err.Error()
		return out
	}
	users, err := h.claimUsers(ctx, c)
	if err != nil {
		out.Error = key + ": listing the pods that mount it: " + err.Error()
		return out
	}
	v := volumes.PodVolume{Namespace: c.Namespace, ClaimName: c.Claim, PVName: pvc.Spec.VolumeName, Type: "persistentVolumeClaim", Identity: "pvc/" + c.Namespace + "/" + c.Claim}
	hr := helperRun{key: key, namespace: c.Namespace, claim: c.Claim, readOnly: true, job: Job{Op: OpCheck, Volume: v}}
	for _, u := range users {
		if u.writable {
			out.WrittenBy = append(out.WrittenBy, u.pod.Name)
		}
	}
	if len(users) > 0 {
		u := users[0]
		hr.node, hr.tolerate = u.pod.Spec.NodeName, true
		if rwop(pvc) {
			hr.claim = ""
			hr.job.PodsDir = MountPodsDir
			hr.job.Volume.Pod, hr.job.Volume.PodUID, hr.job.Volume.Volume = u.pod.Name, string(u.pod.UID), u.volume
		}
	}
	var oc JobOutcome
	res, err := h.run(ctx, hr, &oc, func(Progress) {})
	if res != nil {
		out.HelperPod, out.HelperNode = res.Pod, res.Node
	}
	switch {
	case err != nil:
		out.Error = err.Error()
	case oc.Error != "":
		out.Error = key + ": " + oc.Error
	case oc.Check == nil:
		out.Error = key + ": the helper reported no check"
	default:
		out.Check = oc.Check
	}
	return out
}

// claimUsers are the pods on a node, not finished, that mount claim c.
func (h *Helpers) claimUsers(ctx context.Context, c volumes.ClaimRef) ([]claimUser, error) {
	pods, err := h.Client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []claimUser
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		for _, vol := range p.Spec.Volumes {
			src := vol.PersistentVolumeClaim
			if src == nil || src.ClaimName != c.Claim {
				continue
			}
			out = append(out, claimUser{pod: p, volume: vol.Name, writable: !src.ReadOnly && mountsWritable(p.Spec, vol.Name)})
		}
	}
	return out, nil
}

// mountsWritable says whether a container of spec mounts volume name
// writable.
func mountsWritable(spec corev1.PodSpec, name string) bool {
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				if m.Name == name && !m.ReadOnly {
					return true
				}
			}
		}
	}
	return false
}

func rwop(pvc *corev1.PersistentVolumeClaim) bool {
	for _, m := range pvc.Spec.AccessModes {
		if m == corev1.ReadWriteOncePod {
			return true
		}
	}
	return false
}
