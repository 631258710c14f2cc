package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/helperpod"
)

// writerScript writes 5 MiB of random bytes and a small file into /data,
// and their checksums into /data/sum, unless /data/sum is there already
// (a restored volume): a workload whose data did not arrive writes new
// random data, whose checksums differ from the source's.
const writerScript = `[ -f /data/sum ] || { dd if=/dev/urandom of=/data/blob bs=1M count=5 2>/dev/null; mkdir -p /data/sub; hostname > /data/sub/who; cd /data && sha256sum blob sub/who > sum; }; sync`

// workloadFixture is the source side of TestMigrateWorkloadVolumes: one
// workload of each kind, each with data in its volumes.
type workloadFixture struct {
	ns    string
	image string
}

func (f workloadFixture) container(keepRunning bool) corev1.Container {
	script := writerScript
	if keepRunning {
		script += "; touch /tmp/ready; sleep 3600"
	}
	c := corev1.Container{
		Name: "main", Image: f.image, Command: []string{"sh", "-c", script},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}
	if keepRunning {
		c.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}}, PeriodSeconds: 1, FailureThreshold: 900}
	}
	return c
}

func claimVolume(claim string) corev1.Volume {
	return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func claimSpec() corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")}},
	}
}

// create makes, in the source: Deployment web with claim web-data, a
// 3-replica StatefulSet db with volumeClaimTemplates data and its Service
// db, pod cache with
// an opted-in emptyDir, and suspended CronJob report whose Job (made from
// its template, as kubectl create job --from does) wrote claim report-data.
func (f workloadFixture) create(ctx context.Context, t *testing.T, k kubernetes.Interface) {
	t.Helper()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	zero := int64(0)
	must(k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, metav1.CreateOptions{}))
	for _, c := range []string{"web-data", "report-data"} {
		must(k.CoreV1().PersistentVolumeClaims(f.ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: c}, Spec: claimSpec()}, metav1.CreateOptions{}))
	}
	one, three := int32(1), int32(3)
	tmpl := func(app string, vol corev1.Volume, running bool) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &zero, Containers: []corev1.Container{f.container(running)}, Volumes: []corev1.Volume{vol}}}
	}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	must(k.AppsV1().Deployments(f.ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: sel("web"), Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: tmpl("web", claimVolume("web-data"), true)}}, metav1.CreateOptions{}))
	dbTmpl := tmpl("db", corev1.Volume{}, true)
	dbTmpl.Spec.Volumes = nil
	must(k.AppsV1().StatefulSets(f.ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: &three, Selector: sel("db"), ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
			Template:             dbTmpl,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: claimSpec()}}}}, metav1.CreateOptions{}))
	must(k.CoreV1().Services(f.ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Name: "sql", Port: 5432}}}}, metav1.CreateOptions{}))
	cache := tmpl("cache", corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, true)
	must(k.CoreV1().Pods(f.ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cache", Labels: cache.Labels,
		Annotations: map[string]string{"backup.ferry.dev/backup-volumes": "data"}}, Spec: cache.Spec}, metav1.CreateOptions{}))
	suspend := true
	jobTmpl := tmpl("report", claimVolume("report-data"), false)
	jobTmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	cj, err := k.BatchV1().CronJobs(f.ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "report"},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", Suspend: &suspend, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTmpl}}}}, metav1.CreateOptions{})
	must(cj, err)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "report-manual",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID}}},
		Spec: cj.Spec.JobTemplate.Spec}
	must(k.BatchV1().Jobs(f.ns).Create(ctx, job, metav1.CreateOptions{}))
}

// sums waits for the fixture's pods in c and returns, per volume, the
// checksums its data has now: the source's /data/sum, or (want == nil)
// computed afresh in the target, where the CronJob's claim is read by a
// checker pod.
func (f workloadFixture) sums(ctx context.Context, t *testing.T, c *testenv.Cluster, target bool) map[string]string {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	out := map[string]string{}
	read := func(pod string) string {
		t.Helper()
		cmd := "cat /data/sum"
		if target {
			cmd = "cd /data && sha256sum blob sub/who"
		}
		s, _, err := testenv.Exec(ctx, c.Config, f.ns, pod, "main", nil, "sh", "-c", cmd)
		if err != nil {
			dumpCluster(ctx, t, c)
			t.Fatalf("%s: %v", c.Name, err)
		}
		return s
	}
	for _, app := range []string{"web", "db", "cache"} {
		pods := waitAppReady(ctx, t, c, f.ns, app)
		for _, p := range pods {
			key := app
			if app == "db" {
				key = p // each replica has its own claim
			}
			out[key] = read(p)
		}
	}
	if !target {
		waitJobDone(ctx, t, k, f.ns, "report-manual")
	}
	// The Job's pod has finished: a checker pod reads its claim.
	chk := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "check-report", Labels: map[string]string{"app": "check-report"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{f.container(true)}, Volumes: []corev1.Volume{claimVolume("report-data")}}}
	chk.Spec.Containers[0].Command = []string{"sh", "-c", "touch /tmp/ready; sleep 3600"}
	if _, err := k.CoreV1().Pods(f.ns).Create(ctx, chk, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAppReady(ctx, t, c, f.ns, "check-report")
	out["report"] = read("check-report")
	if err := k.CoreV1().Pods(f.ns).Delete(ctx, "check-report", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitAppReady waits up to 4 minutes for the pods labelled app=<app> to be
// ready (all of them, and as many as the app wants), and returns their names.
func waitAppReady(ctx context.Context, t *testing.T, c *testenv.Cluster, ns, app string) []string {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	want := 1
	if app == "db" {
		want = 3
	}
	deadline := time.Now().Add(4 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		pods, err := k.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err == nil {
			var names []string
			last = ""
			for i := range pods.Items {
				p := &pods.Items[i]
				if podReady(p) {
					names = append(names, p.Name)
				}
				last += fmt.Sprintf("%s: %s %+v; ", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			}
			if len(names) == want && len(pods.Items) == want {
				sort.Strings(names)
				return names
			}
		}
		time.Sleep(time.Second)
	}
	dumpCluster(ctx, t, c)
	t.Fatalf("%s: pods app=%s not ready after 4m: %s", c.Name, app, last)
	return nil
}

func waitJobDone(ctx context.Context, t *testing.T, k kubernetes.Interface, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		j, err := k.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && j.Status.Succeeded > 0 {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("job %s/%s did not succeed in 3m", ns, name)
}

// noHelperLeft fails when ferry's helper pods or their Secrets are in c.
func noHelperLeft(ctx context.Context, t *testing.T, c *testenv.Cluster) {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	sel := metav1.ListOptions{LabelSelector: helperpod.LabelRun}
	pods, err := k.CoreV1().Pods("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := k.CoreV1().Secrets("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Errorf("%s: helper pod %s/%s left behind", c.Name, p.Namespace, p.Name)
		}
	}
	for _, s := range secrets.Items {
		t.Errorf("%s: helper Secret %s/%s left behind", c.Name, s.Namespace, s.Name)
	}
}

// TestMigrateWorkloadVolumes moves the volume data of every workload kind
// with `ferry migrate`, nothing installed in either cluster: helper pods
// running ferry's image (from the tests' registry, the only one the
// nodes reach) read each claim in the source and fill each claim in the
// target before its workload is created; the emptyDir goes through the
// kubelet pods directory. In the target, each workload's pods run on the
// source's data, checked file by file.
func TestMigrateWorkloadVolumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := newVolumeEnv(ctx, t)
	src, dst, reg, image := e.src, e.dst, e.reg, e.image
	dir := t.TempDir()
	f := workloadFixture{ns: "shop", image: reg.NodeHost + "/" + testenv.BusyboxImage}
	f.create(ctx, t, kubernetes.NewForConfigOrDie(src.Config))
	want := f.sums(ctx, t, src, false)

	r := ferry(t, e.env, "migrate", "--kubeconfig", e.kubeconfig, "--from-context", "src", "--to-context", "dst", "--storage", e.location,
		"--name", "m1", "--include-namespaces", "shop", "--default-volumes-to-fs-backup", "--repository-password-file", e.password, "--insecure",
		"--helper-image", image, "--node-pods-dir", filepath.Join(src.Node.RootDir, "pods"), "--to-node-pods-dir", filepath.Join(dst.Node.RootDir, "pods"),
		"--report-dir", filepath.Join(dir, "report"))
	t.Logf("migrate: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	if r.code != 0 {
		dumpCluster(ctx, t, dst)
		t.Fatalf("migrate: exit %d", r.code)
	}
	for _, claim := range []string{"web-data", "report-data", "data-db-0", "data-db-1", "data-db-2"} {
		if !strings.Contains(r.stdout, "claim shop/"+claim) {
			t.Errorf("migrate's summary does not list claim shop/%s", claim)
		}
	}
	got := f.sums(ctx, t, dst, true)
	for k, w := range want {
		if strings.TrimSpace(got[k]) != strings.TrimSpace(w) {
			t.Errorf("%s: target's data has checksums\n%s\nwant the source's\n%s", k, got[k], w)
		}
	}
	checkRunningReport(t, filepath.Join(dir, "report"), f.ns)
	runningFaults(ctx, t, e, f, dir)
	noHelperLeft(ctx, t, src)
	noHelperLeft(ctx, t, dst)
}

// TestServerWorkloadVolumes is TestMigrateWorkloadVolumes in server mode:
// `ferry install` puts the server and the node agents on both clusters;
// a Backup and a Restore (CLI --server) move every workload kind's data.
// The node agents read the volumes of running pods and fill the emptyDir
// of the restored pod; the server's helper pods back up the claim no pod
// mounts (the finished Job's) and fill every claim before its workloads.
func TestServerWorkloadVolumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := newVolumeEnv(ctx, t)
	e.install(ctx, t)
	f := workloadFixture{ns: "shop", image: e.reg.NodeHost + "/" + testenv.BusyboxImage}
	f.create(ctx, t, kubernetes.NewForConfigOrDie(e.src.Config))
	want := f.sums(ctx, t, e.src, false)
	run := func(args ...string) result { return ferry(t, nil, append(args, "--kubeconfig", e.kubeconfig)...) }
	if r := run("backup", "create", "s1", "--server", "--wait", "--context", "src", "--include-namespaces", "shop",
		"--default-volumes-to-fs-backup", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"phase": "Completed"`) {
		dumpCluster(ctx, t, e.src)
		phase, errs := phaseOf(t, e.describe(t, "backup", "s1"))
		t.Fatalf("backup: exit %d: %s: %s\n%s", r.code, phase, errs, r.stderr)
	}
	waitBackupSynced(ctx, t, e.dst, "s1")
	if r := run("restore", "create", "s1", "--from-backup", "s1", "--server", "--context", "dst", "--verify"); r.code != 0 {
		t.Fatalf("restore: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	rs := waitRestored(ctx, t, e.dst, "s1")
	// The runtime checks ran in server mode through the one engine.
	if v := rs.Status.Verification; v == nil || v.Running == nil || v.Running.Failed != 0 || v.Running.ClaimsWithData != 5 || v.Running.ClaimsEqual != 5 ||
		v.Running.Workloads < 4 || v.Running.WorkloadsRunning != v.Running.Workloads {
		t.Errorf("server-mode Restore s1: status.verification %+v, want every workload running and 5 of 5 claims equal", v)
	}
	got := f.sums(ctx, t, e.dst, true)
	for k, w := range want {
		if strings.TrimSpace(got[k]) != strings.TrimSpace(w) {
			t.Errorf("%s: target's data has checksums\n%s\nwant the source's\n%s", k, got[k], w)
		}
	}
	noHelperLeft(ctx, t, e.src)
	noHelperLeft(ctx, t, e.dst)
}
