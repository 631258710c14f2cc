package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

// runningCheck is one row of a report's running section.
type runningCheck struct {
	Kind, Resource, Namespace, Name, Outcome, Detail, Reason, Message, Data, DataDetail string
	OK                                                                                  bool
}

type runningSection struct {
	Skipped           string         `json:"skipped"`
	ImagesCheckedFrom string         `json:"imagesCheckedFrom"`
	Counts            map[string]int `json:"counts"`
	Checks            []runningCheck `json:"checks"`
}

// readRunning reads the running section of dir/report.json.
func readRunning(t *testing.T, dir string) *runningSection {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Running *runningSection `json:"running"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if v.Running == nil {
		t.Fatalf("%s/report.json has no running section", dir)
	}
	return v.Running
}

// row is the check of kind (a Resource, or "image") ns/name; an image's
// name matches with its digest ("ref@sha256:...") too.
func (r *runningSection) row(t *testing.T, kind, ns, name string) runningCheck {
	t.Helper()
	for _, c := range r.Checks {
		if (c.Resource == kind || c.Kind == kind) && c.Namespace == ns && (c.Name == name || (kind == "image" && strings.HasPrefix(c.Name, name+"@"))) {
			return c
		}
	}
	t.Fatalf("the running section has no %s %s/%s: %+v", kind, ns, name, r.Checks)
	return runningCheck{}
}

// checkRunningReport checks the running section of the workload
// fixture's migration (report in dir): every workload runs, the Service
// serves, and every claim is bound and equal to what the restore wrote,
// with the content digest and the snapshot's root object.
func checkRunningReport(t *testing.T, dir, ns string) {
	t.Helper()
	r := readRunning(t, dir)
	if r.Skipped != "" {
		t.Fatalf("runtime checks skipped: %s", r.Skipped)
	}
	for _, c := range r.Checks {
		if !c.OK {
			t.Errorf("%s %s/%s: %s: %s: %s", c.Resource, c.Namespace, c.Name, c.Outcome, c.Reason, c.Message)
		}
	}
	for _, w := range [][2]string{{"Deployment", "web"}, {"StatefulSet", "db"}, {"Pod", "cache"}, {"CronJob", "report"}, {"Service", "db"}} {
		if c := r.row(t, w[0], ns, w[1]); !c.OK {
			t.Errorf("%s %s: %+v", w[0], w[1], c)
		}
	}
	claims := []string{"web-data", "report-data", "data-db-0", "data-db-1", "data-db-2"}
	for _, name := range claims {
		c := r.row(t, "PersistentVolumeClaim", ns, name)
		if c.Data != "equal" || !regexp.MustCompile(`content sha256:[0-9a-f]{64}; snapshot \S+ \(root object \S+\): \d+ files`).MatchString(c.DataDetail) {
			t.Errorf("claim %s: data %q (%s), want equal, with the content digest and the snapshot's root object", name, c.Data, c.DataDetail)
		}
	}
	if n := r.Counts["claimsEqual"]; n != len(claims) {
		t.Errorf("claimsEqual = %d, want %d", n, len(claims))
	}
	if r.Counts["images"] == 0 || r.Counts["imagesPresent"] != r.Counts["images"] {
		t.Errorf("images: %d of %d present", r.Counts["imagesPresent"], r.Counts["images"])
	}
}

// runningFaults migrates a namespace with one fault of each kind the
// runtime checks must name, then changes a restored claim behind ferry's
// back and verifies again, then verifies without the runtime checks.
func runningFaults(ctx context.Context, t *testing.T, e *volumeEnv, f workloadFixture, dir string) {
	t.Helper()
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	// The image "pull" runs from exists in the source's repository only.
	if err := crane.Copy(e.reg.Host+"/"+testenv.BusyboxImage, e.reg.Host+"/pulltest/busybox:1", crane.Insecure); err != nil {
		t.Fatal(err)
	}
	// Only the source's node has the label "pinned" selects.
	if _, err := src.CoreV1().Nodes().Patch(ctx, e.src.Node.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"ferry-test/zone":"source"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	faultFixture(ctx, t, src, f.image, e.reg.NodeHost+"/pulltest/busybox:1")
	for _, app := range []string{"pull", "pinned", "cfg", "fine"} {
		waitAppReady(ctx, t, e.src, "faults", app)
	}
	report := filepath.Join(dir, "faults")
	r := ferry(t, e.env, "migrate", "--kubeconfig", e.kubeconfig, "--from-context", "src", "--to-context", "dst", "--storage", e.location,
		"--name", "m2", "--include-namespaces", "faults", "--exclude-resources", "secrets", "--insecure",
		"--image-registry-mappings", e.reg.NodeHost+"/pulltest="+e.reg.NodeHost+"/absent",
		"--helper-image", e.image, "--repository-password-file", e.password, "--verify-runtime-timeout", "45s", "--report-dir", report)
	t.Logf("migrate with faults: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	if r.code != 2 {
		t.Fatalf("migrate with faults: exit %d, want 2 (PartiallyFailed)", r.code)
	}
	if !strings.Contains(r.stderr, "migration m2 PartiallyFailed (RuntimeChecksFailed)") {
		t.Errorf("migrate with faults does not say PartiallyFailed")
	}
	run := readRunning(t, report)
	missing := e.reg.NodeHost + "/absent/busybox:1"
	for _, w := range []struct{ kind, name, reason, inMsg string }{
		{"Deployment", "pull", "ImagePullBackOff|ErrImagePull", "image " + missing},
		{"Deployment", "pinned", "FailedScheduling", "node affinity/selector"},
		{"Deployment", "cfg", "CreateContainerConfigError", `secret "db-password" not found`},
		{"image", missing, "NotFound", "used by Deployment faults/pull"},
	} {
		ns := "faults"
		if w.kind == "image" {
			ns = ""
		}
		c := run.row(t, w.kind, ns, w.name)
		if c.OK || !regexp.MustCompile("^("+w.reason+")$").MatchString(c.Reason) || !strings.Contains(c.Message, w.inMsg) {
			t.Errorf("%s %s: %+v, want a failure with reason %s naming %q", w.kind, w.name, c, w.reason, w.inMsg)
		}
	}
	if c := run.row(t, "Deployment", "faults", "fine"); !c.OK {
		t.Errorf("fine: %+v, want running", c)
	}
	for i, c := range run.Checks {
		if i < run.Counts["failed"] == c.OK {
			t.Errorf("row %d (%s %s) OK=%v: the failures come first", i, c.Resource, c.Name, c.OK)
		}
	}
	screenshotRunning(t, report)
	tamperedClaim(ctx, t, e, f, dir)
}

// faultFixture makes namespace faults in the source: Deployments pull
// (image, which the migration maps to a repository without it), pinned
// (a node selector only the source's node satisfies), cfg (an environment
// variable from Secret db-password, which the migration leaves out) and
// fine.
func faultFixture(ctx context.Context, t *testing.T, k kubernetes.Interface, busybox, pullImage string) {
	t.Helper()
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "faults"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.CoreV1().Secrets("faults").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-password"}, StringData: map[string]string{"password": "s3cret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	for _, app := range []string{"pull", "pinned", "cfg", "fine"} {
		c := corev1.Container{Name: "main", Image: busybox, Command: []string{"sh", "-c", "touch /tmp/ready; sleep 3600"},
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}}, PeriodSeconds: 1, FailureThreshold: 900}}
		spec := corev1.PodSpec{TerminationGracePeriodSeconds: new(int64)}
		switch app {
		case "pull":
			c.Image = pullImage
		case "pinned":
			spec.NodeSelector = map[string]string{"ferry-test/zone": "source"}
		case "cfg":
			c.Env = []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db-password"}, Key: "password"}}}}
		}
		spec.Containers = []corev1.Container{c}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app}, Spec: appsv1.DeploymentSpec{Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: spec}}}
		if _, err := k.AppsV1().Deployments("faults").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// tamperedClaim changes a file of claim report-data in the target, which
// the first migration restored and no running pod mounts, through a pod
// that exits; `ferry verify` then reports the claim unequal, naming the
// file, and exits 2. Without the runtime checks the same verify passes
// and its report says they were skipped.
func tamperedClaim(ctx context.Context, t *testing.T, e *volumeEnv, f workloadFixture, dir string) {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(e.dst.Config)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tamper"}, Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "main", Image: f.image, Command: []string{"sh", "-c", "echo tampered >> /data/sub/who"},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
		Volumes: []corev1.Volume{claimVolume("report-data")}}}
	if _, err := k.CoreV1().Pods(f.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := k.CoreV1().Pods(f.ns).Get(ctx, "tamper", metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.PodSucceeded {
			break
		}
		if time.Now().After(deadline) {
			dumpCluster(ctx, t, e.dst)
			t.Fatalf("pod tamper did not succeed: %v %+v", err, got.Status)
		}
		time.Sleep(time.Second)
	}
	verify := func(report string, extra ...string) result {
		args := append([]string{"verify", "--kubeconfig", e.kubeconfig, "--context", "dst", "--storage", e.location, "--backup", "m1", "--restore", "m1",
			"--helper-image", e.image, "--report-dir", report}, extra...)
		return ferry(t, e.env, args...)
	}
	report := filepath.Join(dir, "tampered")
	r := verify(report, "--verify-runtime-timeout", "1m")
	t.Logf("verify after tampering: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	if r.code != 2 {
		t.Errorf("verify after tampering: exit %d, want 2", r.code)
	}
	c := readRunning(t, report).row(t, "PersistentVolumeClaim", f.ns, "report-data")
	if c.OK || c.Data != "unequal" || !strings.Contains(c.Message, "claim "+f.ns+"/report-data") || !strings.Contains(c.Message, `"sub/who" (changed)`) {
		t.Errorf("tampered claim: %+v, want unequal, naming the claim and sub/who", c)
	}
	if !strings.Contains(r.stdout, "report-data") {
		t.Errorf("verify's output does not name the tampered claim")
	}
	report = filepath.Join(dir, "no-runtime")
	if r := verify(report, "--verify-runtime=false"); r.code != 0 {
		t.Errorf("verify --verify-runtime=false: exit %d, want 0 (the objects match)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if s := readRunning(t, report).Skipped; !strings.Contains(s, "skip") {
		t.Errorf("verify --verify-runtime=false: report's running section says %q, want skipped", s)
	}
}

// artifactsDir is where a test keeps what a person looks at afterwards
// (screenshots): $FERRY_TEST_ARTIFACTS/<test>, or _artifacts/<test> in
// the repository.
func artifactsDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv("FERRY_TEST_ARTIFACTS")
	if root == "" {
		root = filepath.Join("..", "..", "_artifacts")
	}
	dir := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshotRunning renders dir/report.html in headless Chromium, keeps a
// screenshot in the test's artifacts, and checks the rendered running
// section: its headline, and its failed rows above the others.
func screenshotRunning(t *testing.T, dir string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (make control-plane installs it): %v", err)
	}
	page := "file://" + filepath.Join(dir, "report.html")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(chromiumFlags(t), "--dump-dom", page)...)
	cmd.Stderr = &errb
	dom, err := cmd.Output()
	if err != nil || len(dom) == 0 {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, errb.String())
	}
	shot := filepath.Join(artifactsDir(t), "report-running.png")
	cmd = exec.CommandContext(ctx, bin, append(chromiumFlags(t), "--window-size=1280,1400", "--screenshot="+shot, page)...)
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, errb.String())
	}
	checkNotBlank(t, shot)
	t.Logf("screenshot of the report: %s", shot)
	head := regexp.MustCompile(`id="running-headline">([^<]*)<`).FindSubmatch(dom)
	if head == nil || !strings.Contains(string(head[1]), "workloads running") {
		t.Errorf("the rendered page has no running headline: %q", head)
	}
	oks := regexp.MustCompile(`class="running-check[^"]*"[^>]*data-ok="(true|false)"`).FindAllSubmatch(dom, -1)
	if len(oks) == 0 || string(oks[0][1]) != "false" {
		t.Fatalf("the rendered running section does not start with a failure: %q", oks)
	}
	seenOK := false
	for _, m := range oks {
		if string(m[1]) == "true" {
			seenOK = true
		} else if seenOK {
			t.Errorf("a failed row comes after a passed one in the rendered page")
		}
	}
	if !bytes.Contains(dom, []byte("ImagePullBackOff")) && !bytes.Contains(dom, []byte("ErrImagePull")) {
		t.Errorf("the rendered page does not show the image pull failure")
	}
}
