package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubeferry/ferry/internal/testenv"
)

// volumeEnv is two clusters with a node each, ferry's image in the tests'
// registry and an S3 location, for CLI runs that move volume data through
// helper pods.
type volumeEnv struct {
	src, dst           *testenv.Cluster
	reg                *testenv.Registry
	image, kubeconfig  string
	location, password string
	env                []string
	s3                 *testenv.S3
}

func newVolumeEnv(ctx context.Context, t *testing.T) *volumeEnv {
	t.Helper()
	reg, err := testenv.StartRegistry(ctx, t, testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	image := makeImage(t, reg)
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.CreateBucket(ctx, "ferry"); err != nil {
		t.Fatal(err)
	}
	cs, err := testenv.StartNodeClusters(ctx, t, reg, "src", "dst")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &volumeEnv{src: cs[0], dst: cs[1], reg: reg, image: image, s3: s3, kubeconfig: filepath.Join(dir, "kubeconfig"), password: filepath.Join(dir, "password"),
		env:      []string{"AWS_ACCESS_KEY_ID=" + s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3.SecretKey},
		location: fmt.Sprintf("s3://ferry?endpoint=%s&use_path_style=true&region=%s", s3.NodeEndpoint, testenv.S3Region)}
	if err := testenv.WriteKubeconfig(e.kubeconfig, cs...); err != nil {
		t.Fatal(err)
	}
	writeFile(t, e.password, "volume-env-password\n")
	return e
}

// run runs ferry against cluster c (its context) with the location, the
// password and the helper image.
func (e *volumeEnv) run(t *testing.T, c *testenv.Cluster, args ...string) result {
	t.Helper()
	args = append(args, "--kubeconfig", e.kubeconfig, "--context", c.Name, "--storage", e.location, "--helper-image", e.image,
		"--node-pods-dir", filepath.Join(c.Node.RootDir, "pods"))
	if !hasFlag(args, "--repository-password-file") {
		args = append(args, "--repository-password-file", e.password)
	}
	return ferry(t, e.env, args...)
}

// install runs `ferry install --apply` on both clusters, with the
// location, its credentials and the password, and waits for the server and
// the node agent to run (the server syncing its location every 2 s).
func (e *volumeEnv) install(ctx context.Context, t *testing.T) {
	t.Helper()
	creds := filepath.Join(t.TempDir(), "credentials")
	writeFile(t, creds, strings.Join(e.env, "\n")+"\n")
	for _, c := range []*testenv.Cluster{e.src, e.dst} {
		r := ferry(t, nil, "install", "--apply", "--kubeconfig", e.kubeconfig, "--context", c.Name, "--image", e.image,
			"--host-pods-dir", filepath.Join(c.Node.RootDir, "pods"), "--location-url", e.location,
			"--credentials-file", creds, "--repository-password-file", e.password)
		if r.code != 0 {
			t.Fatalf("install into %s: exit %d\n%s\n%s", c.Name, r.code, r.stdout, r.stderr)
		}
		k := kubernetes.NewForConfigOrDie(c.Config)
		fastStoreSync(ctx, t, k)
		waitLabeledRunning(ctx, t, k, "ferry", "app.kubernetes.io/component=ferry-server")
		waitLabeledRunning(ctx, t, k, "ferry", "app.kubernetes.io/component=ferry-node-agent")
	}
}

// describe runs `ferry <kind> describe name -o json`.
func (e *volumeEnv) describe(t *testing.T, kind, name string) result {
	t.Helper()
	return ferry(t, e.env, kind, "describe", name, "-o", "json", "--storage", e.location)
}

func hasFlag(args []string, f string) bool {
	for _, a := range args {
		if a == f || strings.HasPrefix(a, f+"=") {
			return true
		}
	}
	return false
}

// claimPod creates namespace ns (if new) with claim data (class, "" for
// the default) and pod p mounting it at /data, with annotations; it waits
// until the pod is ready.
func (e *volumeEnv) claimPod(ctx context.Context, t *testing.T, c *testenv.Cluster, ns, p, class string, ann map[string]string) {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := claimSpec()
	if class != "" {
		spec.StorageClassName = &class
	}
	if _, err := k.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := workloadFixture{ns: ns, image: e.reg.NodeHost + "/" + testenv.BusyboxImage}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p, Labels: map[string]string{"app": p}, Annotations: ann},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{f.container(true)}, Volumes: []corev1.Volume{claimVolume("data")}}}
	if _, err := k.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAppReady(ctx, t, c, ns, p)
}

// mountPod runs pod name in ns of c, which only mounts claim data at
// /data (it writes nothing), and waits until it is ready.
func (e *volumeEnv) mountPod(ctx context.Context, t *testing.T, c *testenv.Cluster, ns, name string) {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	f := workloadFixture{ns: ns, image: e.reg.NodeHost + "/" + testenv.BusyboxImage}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{f.container(true)}, Volumes: []corev1.Volume{claimVolume("data")}}}
	p.Spec.Containers[0].Command = []string{"sh", "-c", "touch /tmp/ready; sleep 3600"}
	if _, err := k.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAppReady(ctx, t, c, ns, name)
}

// phaseOf reads the phase and the errors of a backup or restore from
// `ferry ... describe -o json`.
func phaseOf(t *testing.T, r result) (string, string) {
	t.Helper()
	var out struct {
		Backup, Restore struct {
			Status struct {
				Phase, FailureReason string
			}
		}
		Results struct{ Errors []string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("describe -o json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	st := out.Backup.Status
	if st.Phase == "" {
		st = out.Restore.Status
	}
	return st.Phase, st.FailureReason + " " + strings.Join(out.Results.Errors, "; ")
}

// TestBackupHooks: a pre-backup hook (Velero's annotations) writes a file
// that is then in the snapshot, and its post hook removes it; a failing
// hook with on-error Fail fails the backup, naming pod, container and
// command; a hook that sleeps past its timeout is stopped and reported.
// The restored pod runs its init-container restore hook first, and its
// post-restore exec hook once it is ready.
// Then bad input for a restore of claims, each named in its error: a
// storage class the target lacks, a helper pod that cannot be scheduled
// (a tainted node), a wrong repository password, and a backup that lacks
// a claim's data.
func TestBackupHooks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := newVolumeEnv(ctx, t)
	src, dst := e.src, e.dst
	ks, kd := kubernetes.NewForConfigOrDie(src.Config), kubernetes.NewForConfigOrDie(dst.Config)
	e.claimPod(ctx, t, src, "hk", "pg", "", map[string]string{
		"backup.ferry.dev/backup-volumes":      "data",
		"pre.hook.backup.velero.io/container":  "main",
		"pre.hook.backup.velero.io/command":    `["/bin/sh", "-c", "echo flushed > /data/flushed"]`,
		"post.hook.backup.velero.io/command":   `["/bin/sh", "-c", "rm /data/flushed"]`,
		"post.hook.backup.velero.io/on-error":  "Fail",
		"pre.hook.backup.velero.io/timeout":    "20s",
		"post.hook.backup.velero.io/container": "main",
		// Restore hooks, run in the target.
		"init.hook.restore.velero.io/container-image": e.reg.NodeHost + "/" + testenv.BusyboxImage,
		"init.hook.restore.velero.io/container-name":  "restore-hook",
		"init.hook.restore.velero.io/command":         `["/bin/sh", "-c", "echo init-ran"]`,
		"post.hook.restore.velero.io/command":         `["/bin/sh", "-c", "echo restored > /data/post-restore"]`,
		"post.hook.restore.velero.io/wait-for-ready":  "true",
	})
	if r := e.run(t, src, "backup", "create", "hooks", "--include-namespaces", "hk", "--exclude-resources", "persistentvolumes"); r.code != 0 {
		t.Fatalf("backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, _, err := testenv.Exec(ctx, src.Config, "hk", "pg", "main", nil, "test", "!", "-e", "/data/flushed"); err != nil {
		t.Errorf("the post-backup hook did not run: /data/flushed is still in the source: %v", err)
	}
	if r := e.run(t, dst, "restore", "create", "hooks", "--from-backup", "hooks"); r.code != 0 {
		t.Fatalf("restore: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	waitAppReady(ctx, t, dst, "hk", "pg")
	if out, _, err := testenv.Exec(ctx, dst.Config, "hk", "pg", "main", nil, "cat", "/data/flushed"); err != nil || strings.TrimSpace(out) != "flushed" {
		t.Errorf("the pre-backup hook's file is not in the snapshot: %q, %v", out, err)
	}
	if out, _, err := testenv.Exec(ctx, dst.Config, "hk", "pg", "main", nil, "cat", "/data/post-restore"); err != nil || strings.TrimSpace(out) != "restored" {
		t.Errorf("the post-restore hook did not run: /data/post-restore is %q, %v", out, err)
	}
	if p, err := kd.CoreV1().Pods("hk").Get(ctx, "pg", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if ics := p.Status.InitContainerStatuses; len(ics) == 0 || ics[0].Name != "restore-hook" || ics[0].State.Terminated == nil || ics[0].State.Terminated.ExitCode != 0 {
		t.Errorf("the init-container restore hook did not run first in the restored pod: %+v", ics)
	}

	t.Run("failing hook", func(t *testing.T) {
		e.claimPod(ctx, t, src, "hk-fail", "bad", "", map[string]string{
			"backup.ferry.dev/backup-volumes":   "data",
			"pre.hook.backup.velero.io/command": `["/bin/sh", "-c", "echo no lock >&2; exit 3"]`,
		})
		r := e.run(t, src, "backup", "create", "fail", "--include-namespaces", "hk-fail")
		if r.code == 0 {
			t.Fatalf("backup with a failing hook: exit 0\n%s", r.stdout)
		}
		phase, errs := phaseOf(t, e.describe(t, "backup", "fail"))
		t.Logf("backup fail: %s: %s", phase, errs)
		for _, want := range []string{"hk-fail/bad", "container main", `["/bin/sh","-c","echo no lock >&2; exit 3"]`, "exit code 3", "no lock"} {
			if !strings.Contains(errs, want) {
				t.Errorf("backup's errors do not name %q: %s", want, errs)
			}
		}
		if phase != "Failed" {
			t.Errorf("backup with a failing on-error=Fail hook is %s, want Failed", phase)
		}
	})

	t.Run("hook past its timeout", func(t *testing.T) {
		e.claimPod(ctx, t, src, "hk-slow", "slow", "", map[string]string{
			"pre.hook.backup.velero.io/command": `["/bin/sh", "-c", "sleep 60"]`,
			"pre.hook.backup.velero.io/timeout": "2s",
		})
		start := time.Now()
		r := e.run(t, src, "backup", "create", "slow", "--include-namespaces", "hk-slow")
		if took := time.Since(start); took > 45*time.Second {
			t.Errorf("the backup took %s: the 2s hook was not stopped", took)
		}
		phase, errs := phaseOf(t, e.describe(t, "backup", "slow"))
		t.Logf("backup slow: %s: %s", phase, errs)
		if r.code == 0 || phase != "Failed" || !strings.Contains(errs, "timed out after 2s") || !strings.Contains(errs, "hk-slow/slow") {
			t.Errorf("backup with a hook past its timeout: exit %d, phase %s, errors %s", r.code, phase, errs)
		}
	})

	t.Run("storage class missing in the target", func(t *testing.T) {
		mode := storagev1.VolumeBindingImmediate
		if _, err := ks.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"},
			Provisioner: "kubernetes.io/host-path", VolumeBindingMode: &mode}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.claimPod(ctx, t, src, "sc", "app", "fast", map[string]string{"backup.ferry.dev/backup-volumes": "data"})
		if r := e.run(t, src, "backup", "create", "sc", "--include-namespaces", "sc", "--exclude-resources", "persistentvolumes,storageclasses.storage.k8s.io"); r.code != 0 {
			t.Fatalf("backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		r := e.run(t, dst, "restore", "create", "sc", "--from-backup", "sc")
		phase, errs := phaseOf(t, e.describe(t, "restore", "sc"))
		t.Logf("restore sc: %s: %s", phase, errs)
		if r.code == 0 || phase != "PartiallyFailed" || !strings.Contains(errs, "claim sc/data") || !strings.Contains(errs, `spec.storageClassName "fast"`) {
			t.Errorf("restore into a target without class fast: exit %d, phase %s, errors: %s", r.code, phase, errs)
		}
	})

	t.Run("helper pod cannot be scheduled", func(t *testing.T) {
		setTaints(ctx, t, kd, dst.Node.Name, func(ts []corev1.Taint) []corev1.Taint {
			return append(ts, corev1.Taint{Key: "ferry.dev/test", Value: "busy", Effect: corev1.TaintEffectNoSchedule})
		})
		defer untaint(ctx, t, kd, dst.Node.Name)
		r := e.run(t, dst, "restore", "create", "tainted", "--from-backup", "hooks", "--namespace-mappings", "hk:hk-tainted", "--helper-unschedulable-timeout", "5s",
			// Also bounds the wait for the post-restore hook of the pod, which cannot run either.
			"--volume-timeout", "20s")
		phase, errs := phaseOf(t, e.describe(t, "restore", "tainted"))
		t.Logf("restore tainted: %s: %s", phase, errs)
		if r.code == 0 || phase != "PartiallyFailed" || !strings.Contains(errs, "claim hk-tainted/data") || !strings.Contains(errs, "cannot be scheduled") || !strings.Contains(errs, "taint") {
			t.Errorf("restore with an unschedulable helper: exit %d, phase %s, errors: %s", r.code, phase, errs)
		}
		// Its pod would start on the empty claim: it is not created.
		if _, err := kd.CoreV1().Pods("hk-tainted").Get(ctx, "pg", metav1.GetOptions{}); err == nil {
			t.Error("pod hk-tainted/pg was created although its claim got no data")
		}
	})

	t.Run("wrong repository password", func(t *testing.T) {
		wrong := filepath.Join(t.TempDir(), "wrong")
		writeFile(t, wrong, "not-the-password\n")
		r := e.run(t, dst, "restore", "create", "wrongpw", "--from-backup", "hooks", "--namespace-mappings", "hk:hk-wrongpw", "--repository-password-file", wrong)
		t.Logf("restore wrongpw: exit %d: %s", r.code, r.stderr)
		if r.code == 0 || !strings.Contains(r.stderr+r.stdout, "claim hk/data") || !strings.Contains(strings.ToLower(r.stderr+r.stdout), "password") {
			t.Errorf("restore with a wrong password: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if _, err := kd.CoreV1().Namespaces().Get(ctx, "hk-wrongpw", metav1.GetOptions{}); err == nil {
			t.Error("the restore with a wrong password wrote namespace hk-wrongpw")
		}
	})

	t.Run("backup lacks the claim's data", func(t *testing.T) {
		// Without a password the claim's data cannot be backed up: the
		// backup is PartiallyFailed, and so is a restore of it.
		r := ferry(t, e.env, "backup", "create", "nodata", "--include-namespaces", "hk", "--exclude-resources", "persistentvolumes",
			"--kubeconfig", e.kubeconfig, "--context", src.Name, "--storage", e.location)
		if r.code == 0 {
			t.Errorf("backup without a password of an opted-in claim: exit 0\n%s", r.stdout)
		}
		r = e.run(t, dst, "restore", "create", "nodata", "--from-backup", "nodata", "--namespace-mappings", "hk:hk-nodata")
		phase, errs := phaseOf(t, e.describe(t, "restore", "nodata"))
		t.Logf("restore nodata: %s: %s", phase, errs)
		if r.code == 0 || phase != "PartiallyFailed" || !strings.Contains(errs, "claim hk-nodata/data") || !strings.Contains(errs, "not in the backup") {
			t.Errorf("restore of a backup without the claim's data: exit %d, phase %s, errors: %s", r.code, phase, errs)
		}
	})
	t.Run("unreadable hook annotation", func(t *testing.T) {
		e.claimPod(ctx, t, src, "hk-bad", "odd", "", map[string]string{
			"backup.ferry.dev/backup-volumes":    "data",
			"pre.hook.backup.velero.io/command":  `["/bin/sh", "-c", "echo hi"]`,
			"pre.hook.backup.velero.io/on-error": "Maybe",
		})
		r := e.run(t, src, "backup", "create", "odd", "--include-namespaces", "hk-bad")
		phase, errs := phaseOf(t, e.describe(t, "backup", "odd"))
		t.Logf("backup odd: %s: %s", phase, errs)
		if r.code == 0 || phase != "Failed" || !strings.Contains(errs, "on-error") || !strings.Contains(errs, "hk-bad/odd") {
			t.Errorf("backup with an unreadable hook annotation: exit %d, phase %s, errors %s", r.code, phase, errs)
		}
	})

	t.Run("a claim no pod mounts", func(t *testing.T) {
		// A database scaled to zero: its claim is backed up by a helper pod
		// (in a namespace that enforces PodSecurity baseline), and restored.
		e.claimPod(ctx, t, src, "scaled", "pgs", "", nil)
		want, _, err := testenv.Exec(ctx, src.Config, "scaled", "pgs", "main", nil, "cat", "/data/sum")
		if err != nil {
			t.Fatal(err)
		}
		if err := ks.CoreV1().Pods("scaled").Delete(ctx, "pgs", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		waitGone(ctx, t, ks, "scaled", "pgs")
		nsObj, err := ks.CoreV1().Namespaces().Get(ctx, "scaled", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nsObj.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
		if _, err := ks.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := e.run(t, src, "backup", "create", "scaled-noflag", "--include-namespaces", "scaled", "--exclude-resources", "persistentvolumes")
		if !strings.Contains(r.stdout+r.stderr, "claim scaled/data: no pod mounts it") {
			t.Errorf("backup without --default-volumes-to-fs-backup does not warn that the unmounted claim's data is not backed up:\n%s\n%s", r.stdout, r.stderr)
		}
		if r := e.run(t, src, "backup", "create", "scaled", "--include-namespaces", "scaled", "--default-volumes-to-fs-backup"); r.code != 0 {
			t.Fatalf("backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if r := e.run(t, dst, "restore", "create", "scaled", "--from-backup", "scaled"); r.code != 0 {
			t.Fatalf("restore: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		e.mountPod(ctx, t, dst, "scaled", "check")
		got, _, err := testenv.Exec(ctx, dst.Config, "scaled", "check", "main", nil, "sh", "-c", "cd /data && sha256sum blob sub/who")
		if err != nil || strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("the unmounted claim restored: %q (%v), want the source's\n%s", got, err, want)
		}
	})

	t.Run("a claim in use is not written over", func(t *testing.T) {
		// Restored once; the app then writes; the restore's record is
		// deleted and the same restore run again: the claim is labelled
		// with its name, but a pod runs on it, so it is left alone.
		if r := e.run(t, dst, "restore", "create", "inuse", "--from-backup", "hooks", "--namespace-mappings", "hk:hk-inuse"); r.code != 0 {
			t.Fatalf("restore: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		waitAppReady(ctx, t, dst, "hk-inuse", "pg")
		if _, _, err := testenv.Exec(ctx, dst.Config, "hk-inuse", "pg", "main", nil, "sh", "-c", "echo live > /data/blob"); err != nil {
			t.Fatal(err)
		}
		if r := ferry(t, e.env, "restore", "delete", "inuse", "--storage", e.location); r.code != 0 {
			t.Fatalf("restore delete: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		r := e.run(t, dst, "restore", "create", "inuse", "--from-backup", "hooks", "--namespace-mappings", "hk:hk-inuse")
		if !strings.Contains(r.stdout+r.stderr, "mounts the claim already") {
			t.Errorf("second restore into a claim in use: exit %d, no warning that it is in use\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if out, _, err := testenv.Exec(ctx, dst.Config, "hk-inuse", "pg", "main", nil, "cat", "/data/blob"); err != nil || strings.TrimSpace(out) != "live" {
			t.Errorf("the application's data was written over: /data/blob is %.40q (%v)", out, err)
		}
	})

	t.Run("a loopback endpoint", func(t *testing.T) {
		loop := strings.Replace(e.location, "172.30.255.1", "127.0.0.1", 1)
		r := ferry(t, e.env, "backup", "create", "loop", "--include-namespaces", "hk", "--kubeconfig", e.kubeconfig, "--context", "src",
			"--storage", loop, "--repository-password-file", e.password, "--helper-image", e.image)
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "loopback") {
			t.Errorf("backup whose location only this machine reaches: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
	noHelperLeft(ctx, t, src)
	noHelperLeft(ctx, t, dst)
}

// waitGone waits up to a minute for pod ns/name to be deleted.
func waitGone(ctx context.Context, t *testing.T, k kubernetes.Interface, ns, name string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if _, err := k.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return
		}
	}
	t.Fatalf("pod %s/%s not gone after 1m", ns, name)
}

func untaint(ctx context.Context, t *testing.T, k kubernetes.Interface, name string) {
	t.Helper()
	setTaints(ctx, t, k, name, func(ts []corev1.Taint) []corev1.Taint {
		var keep []corev1.Taint
		for _, tt := range ts {
			if tt.Key != "ferry.dev/test" {
				keep = append(keep, tt)
			}
		}
		return keep
	})
}

// setTaints changes node name's taints, again when the kubelet updated
// the node meanwhile (a conflict failed a CI run).
func setTaints(ctx context.Context, t *testing.T, k kubernetes.Interface, name string, change func([]corev1.Taint) []corev1.Taint) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := k.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = change(node.Spec.Taints)
		_, err = k.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("node %s: setting its taints: %v", name, err)
	}
}
