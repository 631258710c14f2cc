package testenv

import (
	"context"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// FakeKubelet stands in for a node's kubelet until ctx ends: it creates
// the volume directories of the pods in namespace ns (those bound to node,
// or every pod for node "") under podsDir, laid out as the kubelet mounts
// them (<podsDir>/<pod UID>/volumes/kubernetes.io~csi/<PV>/mount for a
// claim once bound, kubernetes.io~empty-dir/<volume> for an emptyDir).
// The test control plane has no kubelet.
func FakeKubelet(ctx context.Context, cs kubernetes.Interface, ns, node, podsDir string) {
	for ctx.Err() == nil {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				if node != "" && p.Spec.NodeName != node {
					continue
				}
				for _, v := range p.Spec.Volumes {
					var dir string
					switch {
					case v.PersistentVolumeClaim != nil:
						pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
						if err != nil || pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
							continue
						}
						dir = filepath.Join(podsDir, string(p.UID), "volumes", "kubernetes.io~csi", pvc.Spec.VolumeName, "mount")
					case v.CSI != nil:
						dir = filepath.Join(podsDir, string(p.UID), "volumes", "kubernetes.io~csi", v.Name, "mount")
					case v.EmptyDir != nil:
						dir = filepath.Join(podsDir, string(p.UID), "volumes", "kubernetes.io~empty-dir", v.Name)
					default:
						continue
					}
					_ = os.MkdirAll(dir, 0o750)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// FakeScheduler stands in for kube-scheduler until ctx ends: it binds
// every unscheduled pod in namespace ns to node (the pods/binding
// subresource, as the scheduler does). The test control plane has no
// scheduler.
func FakeScheduler(ctx context.Context, cs kubernetes.Interface, ns, node string) {
	for ctx.Err() == nil {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				if p.Spec.NodeName != "" {
					continue
				}
				_ = cs.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name, UID: p.UID},
					Target:     corev1.ObjectReference{Kind: "Node", Name: node},
				}, metav1.CreateOptions{})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}
