package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var createOpts = metav1.CreateOptions{}

func mustClient(t *testing.T, c *Cluster) kubernetes.Interface {
	t.Helper()
	k, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// daemonRSS reads the resident memory of each of the node's daemons.
func daemonRSS(n *Node) map[string]string {
	rss := map[string]string{}
	for _, d := range n.daemons {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				rss[d.name] = strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:"))
			}
		}
	}
	return rss
}

// TestNodeClusters starts two clusters with a real node each and runs, in
// each, a pod from the locally built busybox image (exec into it), and a
// StatefulSet whose volumeClaimTemplates bind and whose pod writes to its
// claim.
func TestNodeClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two clusters with nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	reg, err := StartRegistry(ctx, t, RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cs, err := StartNodeClusters(ctx, t, reg, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("two clusters with a node each Ready in %s", time.Since(start).Round(time.Millisecond))
	image := reg.NodeHost + "/" + BusyboxImage
	for _, c := range cs {
		t.Run(c.Name, func(t *testing.T) {
			k := kubernetes.NewForConfigOrDie(c.Config)
			pod := sleeper("shell", image)
			if _, err := k.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitPodRunning(ctx, t, k, "default", "shell")
			out, _, err := Exec(ctx, c.Config, "default", "shell", "main", strings.NewReader("from stdin"), "sh", "-c", "cat; echo; hostname")
			if err != nil {
				t.Fatal(err)
			}
			if out != "from stdin\nshell\n" {
				t.Errorf("exec printed %q, want stdin and the pod's hostname", out)
			}
			statefulSetClaims(ctx, t, c, k, image)
			t.Logf("RSS with two pods running: %v", daemonRSS(c.Node))
			nodeKeepsItsOwn(ctx, t, c)
		})
	}
}

func sleeper(name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers:                    []corev1.Container{{Name: "main", Image: image, Command: []string{"sleep", "3600"}}},
		},
	}
}

// statefulSetClaims runs a one-replica StatefulSet with a claim template
// and checks the claim is Bound and holds what the pod wrote.
func statefulSetClaims(ctx context.Context, t *testing.T, c *Cluster, k kubernetes.Interface, image string) {
	t.Helper()
	labels := map[string]string{"app": "db"}
	tmpl := sleeper("", image).Spec
	tmpl.Containers[0].Command = []string{"sh", "-c", "echo written-by-db > /data/file && sleep 3600"}
	tmpl.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}},
				},
			}},
		},
	}
	if _, err := k.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodRunning(ctx, t, k, "default", "db-0")
	pvc, err := k.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("claim data-db-0 is %s, want Bound", pvc.Status.Phase)
	}
	var out string
	for i := 0; i < 50 && out != "written-by-db\n"; i++ {
		out, _, _ = Exec(ctx, c.Config, "default", "db-0", "main", nil, "cat", "/data/file")
		time.Sleep(100 * time.Millisecond)
	}
	if out != "written-by-db\n" {
		t.Errorf("the claim holds %q, want what the pod wrote", out)
	}
}

// waitPodRunning waits until the pod is Running, failing with its status.
func waitPodRunning(ctx context.Context, t *testing.T, k kubernetes.Interface, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		p, err := k.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if p.Status.Phase == corev1.PodRunning {
				return
			}
			last = fmt.Sprintf("%s %v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("pod %s/%s not Running after 2m: %s", ns, name, last)
}

// nodeKeepsItsOwn checks review findings on a running node: a failing exec
// runs once (it once fell back to SPDY and ran again), and the pods' logs
// and IP allocations are in the node's folder, not the machine's
// /var/log/pods (whose GC by another kubelet removed them) and
// /var/lib/cni/networks.
func nodeKeepsItsOwn(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	_, _, err := Exec(ctx, c.Config, "default", "shell", "main", nil, "sh", "-c", "echo ran >> /tmp/count; exit 3")
	if err == nil {
		t.Error("exec of a command exiting 3 gave no error")
	}
	out, _, err := Exec(ctx, c.Config, "default", "shell", "main", nil, "cat", "/tmp/count")
	if err != nil || out != "ran\n" {
		t.Errorf("a failing command ran %q times (%v), want once", out, err)
	}
	if logs, _ := filepath.Glob(filepath.Join(c.Node.dirs.podLogs, "default_shell_*")); len(logs) != 1 {
		t.Errorf("pod logs of default/shell in %s: %v, want one folder", c.Node.dirs.podLogs, logs)
	}
	if ips, _ := filepath.Glob(filepath.Join(c.Node.dirs.ipam, c.Node.Netns, "10.244.*")); len(ips) == 0 {
		t.Errorf("no IP allocations in %s", filepath.Join(c.Node.dirs.ipam, c.Node.Netns))
	}
	if shared, _ := filepath.Glob(filepath.Join("/var/lib/cni/networks", c.Node.Netns)); len(shared) > 0 {
		t.Errorf("IP allocations in the machine's %v", shared)
	}
}
