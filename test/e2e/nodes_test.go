package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// TestInstallOnNodes runs ferry as users run it: `make image` builds the
// ferry image and pushes it to the tests' registry, and `ferry install
// --apply` puts the server (a Deployment) and the node agent (a DaemonSet)
// on two clusters with a real node each. A pod in the source writes random
// data to its claim (a local PersistentVolume); a server-mode backup and a
// restore in the target, by the installed server (whose helper pods read
// and fill the claim), bring it back, and the restored pod reads the same
// bytes (checked by sha256sum, through exec).
func TestInstallOnNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e := newVolumeEnv(ctx, t)
	e.install(ctx, t)
	cs := []*testenv.Cluster{e.src, e.dst}
	reg, kubeconfig := e.reg, e.kubeconfig
	src, dst := cs[0], cs[1]
	sum := writeClaimData(ctx, t, src, reg)
	run := func(env []string, args ...string) result {
		return ferry(t, env, append(args, "--kubeconfig", kubeconfig)...)
	}
	// The backup holds the source's local PV (pinned to the source's node);
	// the restore leaves it out, as its claim's data is restored, and the
	// target binds the claim to a volume of its own.
	if r := run(nil, "backup", "create", "b1", "--server", "--wait", "--context", "src", "--include-namespaces", "app",
		"-o", "json"); r.code != 0 ||
		!strings.Contains(r.stdout, `"phase": "Completed"`) {
		dumpCluster(ctx, t, src)
		t.Fatalf("backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	localVolume(ctx, t, dst, filepath.Join(dst.Dir, "local-pv"))
	waitBackupSynced(ctx, t, dst, "b1")
	if r := run(nil, "restore", "create", "r1", "--from-backup", "b1", "--server", "--context", "dst"); r.code != 0 {
		t.Fatalf("restore: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	waitRestored(ctx, t, dst, "r1")
	k := kubernetes.NewForConfigOrDie(dst.Config)
	if _, err := k.CoreV1().PersistentVolumes().Get(ctx, "src-local", metav1.GetOptions{}); err == nil {
		t.Error("the source's local PV src-local was restored: its claim's data is restored into a volume of the target")
	}
	waitLabeledRunning(ctx, t, k, "app", "app=writer")
	out, _, err := testenv.Exec(ctx, dst.Config, "app", "writer", "main", nil, "sha256sum", "/data/blob")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out); len(got) == 0 || got[0] != sum {
		t.Errorf("restored claim: sha256 %q, want %s (the source's)", out, sum)
	}
}

// makeImage runs `make image` with IMAGE in the tests' registry and returns
// the reference the nodes pull.
func makeImage(t *testing.T, reg *testenv.Registry) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// BIN: the build goes to a folder of this test's, not the work tree's.
	cmd := exec.Command("make", "image", "IMAGE="+reg.Host+"/ferry:e2e", "IMAGE_INSECURE=1", "BIN="+t.TempDir())
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	if _, ok := reg.Digest("ferry:e2e"); !ok {
		t.Fatal("make image pushed nothing to ferry:e2e")
	}
	return reg.NodeHost + "/ferry:e2e"
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fastStoreSync makes the installed server sync its location every 2 s
// (the flag's default is a minute).
func fastStoreSync(ctx context.Context, t *testing.T, k kubernetes.Interface) {
	t.Helper()
	patch := `[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--sync-period=2s"}]`
	if _, err := k.AppsV1().Deployments("ferry").Patch(ctx, "ferry-server", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitLabeledRunning waits until a pod with the labels is Running and
// ready, and only that one (a Deployment's old pod gone).
func waitLabeledRunning(ctx context.Context, t *testing.T, k kubernetes.Interface, ns, selector string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		pods, err := k.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil && len(pods.Items) == 1 && podReady(&pods.Items[0]) {
			return
		}
		if err == nil {
			last = ""
			for _, p := range pods.Items {
				last += fmt.Sprintf("%s: %s %v %v; ", p.Name, p.Status.Phase, p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("no single ready pod %s in %s after 3m: %s", selector, ns, last)
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// localVolume makes StorageClass "local" (no provisioner, bound when a pod
// is scheduled) and one local PersistentVolume at path on c's node: the
// node's disk, as a cloud's storage would be.
func localVolume(ctx context.Context, t *testing.T, c *testenv.Cluster, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o777); err != nil {
		t.Fatal(err)
	}
	k := kubernetes.NewForConfigOrDie(c.Config)
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait}
	if _, err := k.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name + "-local"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              "local",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{c.Node.Name}}},
			}}}},
		},
	}
	if _, err := k.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// writeClaimData runs pod app/writer in c with a claim on a local volume;
// it writes 4 MiB of random bytes to /data/blob. It returns their sha256.
func writeClaimData(ctx context.Context, t *testing.T, c *testenv.Cluster, reg *testenv.Registry) string {
	t.Helper()
	localVolume(ctx, t, c, filepath.Join(c.Dir, "local-pv"))
	k := kubernetes.NewForConfigOrDie(c.Config)
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := "local"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")}},
		},
	}
	if _, err := k.CoreV1().PersistentVolumeClaims("app").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "writer", Labels: map[string]string{"app": "writer"},
			Annotations: map[string]string{"backup.ferry.dev/backup-volumes": "data"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "main", Image: reg.NodeHost + "/" + testenv.BusyboxImage,
				Command:      []string{"sh", "-c", "[ -f /data/blob ] || dd if=/dev/urandom of=/data/blob bs=1M count=4 2>/dev/null; sync; touch /tmp/ready; sleep 3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}},
					PeriodSeconds: 1, FailureThreshold: 900},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	}
	if _, err := k.CoreV1().Pods("app").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLabeledRunning(ctx, t, k, "app", "app=writer")
	out, _, err := testenv.Exec(ctx, c.Config, "app", "writer", "main", nil, "sha256sum", "/data/blob")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out)
	if len(f) != 2 || len(f[0]) != 64 {
		t.Fatalf("sha256sum printed %q", out)
	}
	return f[0]
}

// waitBackupSynced waits until store sync has brought Backup name into c.
func waitBackupSynced(ctx context.Context, t *testing.T, c *testenv.Cluster, name string) {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	path := "/apis/ferry.dev/v1alpha1/namespaces/ferry/backups/" + name
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if err := k.RESTClient().Get().AbsPath(path).Do(ctx).Error(); err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("backup %s not synced into %s after 2m", name, c.Name)
}

// dumpCluster logs what a failed node test needs to be read: every pod's
// status, ferry's custom resources, and the logs of ferry's pods.
func dumpCluster(ctx context.Context, t *testing.T, c *testenv.Cluster) {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	pods, err := k.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("%s: listing pods: %v", c.Name, err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("%s: pod %s/%s on %q: %s init %+v containers %+v", c.Name, p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
		if p.Namespace != "ferry" {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			tail := int64(40)
			logs, err := k.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, TailLines: &tail}).DoRaw(ctx)
			t.Logf("%s: logs of %s/%s (%v):\n%s", c.Name, p.Name, ctr.Name, err, logs)
		}
	}
	for _, r := range []string{"backups", "restores", "podvolumebackups", "podvolumerestores", "backupstoragelocations"} {
		raw, err := k.RESTClient().Get().AbsPath("/apis/ferry.dev/v1alpha1/namespaces/ferry/" + r).DoRaw(ctx)
		t.Logf("%s: %s (%v):\n%s", c.Name, r, err, raw)
	}
}

// waitRestored waits up to 3 minutes for Restore name to be Completed.
func waitRestored(ctx context.Context, t *testing.T, c *testenv.Cluster, name string) *v1alpha1.Restore {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	deadline := time.Now().Add(6 * time.Minute) // with --verify, its runtime checks too
	var phase string
	for time.Now().Before(deadline) {
		var r v1alpha1.Restore
		raw, err := k.RESTClient().Get().AbsPath("/apis/ferry.dev/v1alpha1/namespaces/ferry/restores/" + name).DoRaw(ctx)
		if err == nil && json.Unmarshal(raw, &r) == nil {
			phase = string(r.Status.Phase)
			if phase == "Completed" {
				return &r
			}
			if phase == "Failed" || phase == "PartiallyFailed" {
				t.Logf("restore %s: %s", name, raw)
				break
			}
		}
		time.Sleep(time.Second)
	}
	dumpCluster(ctx, t, c)
	t.Fatalf("restore %s is %q, want Completed", name, phase)
	return nil
}
