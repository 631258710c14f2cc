package e2e

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

// createEtcdDB creates StatefulSet etcd in namespace ns: etcd and its
// writer (container main) on one claim, data-etcd-0.
func createEtcdDB(ctx context.Context, t *testing.T, k kubernetes.Interface, ns, registry string) {
	t.Helper()
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one, grace := int32(1), int64(10)
	sel := map[string]string{"app": "etcd"}
	mount := []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	probe := func(cmd ...string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}, PeriodSeconds: 1, FailureThreshold: 900}
	}
	containers := []corev1.Container{
		{Name: "etcd", Image: registry + "/" + testenv.EtcdImage, Command: []string{"sh", "-c", testenv.EtcdDBScript}, VolumeMounts: mount,
			StartupProbe: probe("wget", "-q", "-O", "/dev/null", "http://127.0.0.1:2379/health")},
		{Name: "main", Image: registry + "/" + testenv.BusyboxImage, Command: []string{"sh", "-c", testenv.EtcdWriterScript}, VolumeMounts: mount,
			StartupProbe: probe("test", "-f", "/tmp/ready")},
	}
	claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("500Mi")}}}}
	if _, err := k.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "etcd"},
		Spec: appsv1.StatefulSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}, ServiceName: "etcd",
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: containers}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claim}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkEtcdKeys: the etcd of pod etcd-0 in c holds every key up to the
// last its writer had acknowledged (read first), and that is at least
// acked: none of the writes acknowledged before the cutover is missing.
func checkEtcdKeys(ctx context.Context, t *testing.T, c *testenv.Cluster, ns string, acked int) {
	t.Helper()
	last, held, err := testenv.EtcdKeys(ctx, c.Config, ns, "etcd-0", "main")
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	if last < acked {
		t.Errorf("%s: the writer's last acknowledged key is %d, want at least %d (acknowledged in the source before the cutover)", c.Name, last, acked)
	}
	if held != last {
		t.Errorf("%s: etcd holds %d of the keys k00000001..k%08d its writer had acknowledged", c.Name, held, last)
	}
	t.Logf("%s: etcd holds all %d acknowledged keys (%d acknowledged before the cutover)", c.Name, held, acked)
}
