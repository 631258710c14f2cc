package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

// preflightVolumes is the pre-flight's volume data estimate on real
// nodes: a Deployment whose 1 GiB claim holds 24 MiB (on a hostPath
// volume, of which the kubelet reports no statistics) is checked with
// `ferry migrate --preflight --preflight-pull-probe`, beside one whose
// image is at a registry ferry reaches but the target's node does not:
// the pull probe has the node try every image, and that failure is the
// one blocker. The estimate counts the claim at its used
// bytes, measured by a sizing helper pod (not at its 1 GiB), and its
// backup, restore and verification parts carry the volume data's time
// from the probes' upload in the source and download in the target; the
// probe pods, their Secrets and Leases are gone from both clusters, and
// the location holds exactly the keys it held before.
func preflightVolumes(ctx context.Context, t *testing.T, e *volumeEnv) {
	ks := kubernetes.NewForConfigOrDie(e.src.Config)
	createNamespace(t, ks, "pfv")
	one, zero := int32(1), int64(0)
	spec := claimSpec()
	spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
	if _, err := ks.CoreV1().PersistentVolumeClaims("pfv").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := corev1.Container{Name: "main", Image: e.reg.NodeHost + "/" + testenv.BusyboxImage,
		Command:      []string{"sh", "-c", "dd if=/dev/urandom of=/data/big bs=1M count=24 2>/dev/null && sync && touch /tmp/ready && sleep 3600"},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}}, PeriodSeconds: 1, FailureThreshold: 300}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.DeploymentSpec{Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pfv"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "pfv"}},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &zero, Containers: []corev1.Container{c}, Volumes: []corev1.Volume{claimVolume("data")}}}}}
	if _, err := ks.AppsV1().Deployments("pfv").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodsReady(ctx, t, e.src, "pfv", "app=pfv", 1)
	// A workload whose image ferry resolves where it runs (the registry
	// at this machine's loopback address) but the target's node cannot
	// reach: only the pull probe sees it.
	missing := e.reg.Host + "/" + testenv.BusyboxImage
	d.Name, d.Spec.Template.Spec.Volumes = "ghost", nil
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "main", Image: missing}}
	if _, err := ks.AppsV1().Deployments("pfv").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := locationKeys(ctx, t, e)

	r := ferry(t, e.env, append(e.migrateArgs("pf", "pfv", "pfv2", "--report-dir", t.TempDir()), "--preflight", "--preflight-pull-probe", "-o", "json")...)
	if r.code != 2 {
		t.Fatalf("migrate --preflight: exit %d, want 2 (the image the node cannot pull)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var p report.Preflight
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatalf("migrate --preflight -o json: %v\n%s", err, r.stdout)
	}
	var pulled []report.Risk
	for _, risk := range p.Risks {
		if risk.Severity == report.Blocker && strings.Contains(risk.What, "target node dst-node could not pull it") {
			pulled = append(pulled, risk)
		}
	}
	if len(pulled) != 1 || !strings.Contains(pulled[0].What, missing) || !slices.Equal(pulled[0].Objects, []string{"deployments.apps pfv2/ghost"}) {
		t.Errorf("the pull probe's blockers: %+v; want one, of %s, naming deployment pfv2/ghost (risks: %+v)", pulled, missing, p.Risks)
	}
	est := p.Estimate
	if est == nil {
		t.Fatalf("no estimate; skipped: %v", p.Skipped)
	}
	t.Logf("estimate: %.1f s, %d volume(s) of %d bytes; parts: %+v; skipped: %v", est.Seconds, est.Volumes, est.VolumeBytes, est.Parts, p.Skipped)
	if est.Volumes != 1 || est.UpperBound != 0 || est.VolumeBytes < 24<<20 || est.VolumeBytes > 25<<20 {
		t.Errorf("the estimate counts %d volume(s) of %d bytes (%d at their claim's size); want the one claim at its used 24 MiB, measured", est.Volumes, est.VolumeBytes, est.UpperBound)
	}
	for _, step := range []string{"backup", "restore", "verify"} {
		i := slices.IndexFunc(est.Parts, func(p report.EstimatePart) bool { return p.Step == step })
		if i < 0 || !strings.Contains(est.Parts[i].Basis, "volume data: 1 volume(s), 24.0 MiB") {
			t.Errorf("the %s part does not count the volume data: %+v", step, est.Parts)
		}
	}
	for _, s := range p.Skipped {
		if strings.Contains(s, "volume") {
			t.Errorf("skipped: %s", s)
		}
	}
	if after := locationKeys(ctx, t, e); !slices.Equal(before, after) {
		t.Errorf("the location's keys changed: %d before, %d after (a probe's left: %v)", len(before), len(after), keysUnder(after, store.ProbeDir))
	}
	for _, cl := range []*testenv.Cluster{e.src, e.dst} {
		k := kubernetes.NewForConfigOrDie(cl.Config)
		sel := metav1.ListOptions{LabelSelector: helperpod.LabelManagedBy + "=" + helperpod.ManagedBy}
		pods, err1 := k.CoreV1().Pods("").List(ctx, sel)
		secrets, err2 := k.CoreV1().Secrets("").List(ctx, sel)
		leases, err3 := k.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatal(err1, err2, err3)
		}
		if len(pods.Items)+len(secrets.Items) > 0 {
			t.Errorf("%s: %d helper pod(s) and %d Secret(s) left by the pre-flight", cl.Name, len(pods.Items), len(secrets.Items))
		}
		for _, l := range leases.Items {
			if strings.HasPrefix(l.Name, "ferry-helper-run-") {
				t.Errorf("%s: Lease %s/%s left by the pre-flight", cl.Name, l.Namespace, l.Name)
			}
		}
	}
	if _, err := kubernetes.NewForConfigOrDie(e.dst.Config).CoreV1().Namespaces().Get(ctx, "pfv2", metav1.GetOptions{}); err == nil {
		t.Errorf("the pre-flight created namespace pfv2 in the target")
	}
}

// locationKeys are the keys of the volume env's location, sorted.
func locationKeys(ctx context.Context, t *testing.T, e *volumeEnv) []string {
	t.Helper()
	creds := map[string]string{}
	for _, kv := range e.env {
		k, v, _ := strings.Cut(kv, "=")
		creds[k] = v
	}
	loc, err := store.Open(ctx, e.location, store.WithCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	keys, err := loc.Keys(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

func keysUnder(keys []string, prefix string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}
