package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// rerunInterruptAt is how many of the 1500 ConfigMaps the first restore
// in TestRerun has created when it gets SIGINT.
const rerunInterruptAt = 100

// TestRerun covers re-running restores: a restore sent SIGINT once its
// objects are appearing in the target exits 130 and its record says
// interrupted; the same name then finishes the job, creating the rest and
// finding the first run's objects unchanged; a second restore is all
// unchanged even when a webhook that cannot be reached refuses CREATEs;
// and the target's own default ServiceAccount gets the backup's settings.
func TestRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	createNamespace(t, src, "rr")
	createConfigMaps(t, src, "rr", 1500)
	sa, err := src.CoreV1().ServiceAccounts("rr").Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	no := false
	sa.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	sa.AutomountServiceAccountToken = &no
	if _, err := src.CoreV1().ServiceAccounts("rr").Update(ctx, sa, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.backup(t, "rr", "--include-namespaces", "rr")

	// SIGINT once objects are appearing in the target, then the same
	// command again: it creates the rest and finds the first run's
	// objects unchanged.
	code, stderr := interruptRestore(t, e, dst, rerunInterruptAt)
	if code != 130 || !contains(stderr, "interrupted") {
		t.Errorf("interrupted restore: exit %d, want 130 and a message saying it was interrupted\nstderr: %s", code, stderr)
	}
	g := e.run(t, "restore", "get", "rr", "-o", "json")
	rec := &v1alpha1.Restore{}
	if g.code != 0 {
		t.Fatalf("restore get rr: exit %d\n%s", g.code, g.stderr)
	}
	mustJSON(t, g.stdout, rec)
	if rec.Status.Phase != v1alpha1.PhaseFailed || !contains(rec.Status.FailureReason, "interrupted") {
		t.Errorf("the interrupted restore's record: phase %s, failure %q; want Failed and interrupted", rec.Status.Phase, rec.Status.FailureReason)
	}
	before := len(sourceData(t, dst, "rr"))
	t.Logf("interrupted restore exited %d, leaving %d ConfigMaps in the target: %s", code, before, rec.Status.FailureReason)
	if before < rerunInterruptAt || before >= 1500 {
		t.Fatalf("the interrupted restore left %d of 1500 ConfigMaps, want at least %d and not all", before, rerunInterruptAt)
	}
	rs, r := e.restore(t, "rr", "rr")
	if r.code != 0 || rs.Status.Phase != "Completed" {
		t.Fatalf("re-run after SIGINT: exit %d phase %s\n%s\n%s", r.code, rs.Status.Phase, r.stdout, r.stderr)
	}
	if got := len(sourceData(t, dst, "rr")); got != 1500 {
		t.Errorf("target has %d ConfigMaps after the re-run, want 1500", got)
	}
	created, unchanged := configMapOutcomes(e.results(t, "rr"))
	t.Logf("re-run: counts %+v; ConfigMaps created %d, unchanged %d", rs.Status.Counts, created, unchanged)
	if c := rs.Status.Counts; c.Created == 0 || c.Unchanged == 0 || created+unchanged != 1500 || unchanged < before {
		t.Errorf("re-run after SIGINT: counts %+v; of the ConfigMaps %d created and %d unchanged, want 1500 in all and at least the %d the first run left unchanged", c, created, unchanged, before)
	}
	dsa, err := dst.CoreV1().ServiceAccounts("rr").Get(ctx, "default", metav1.GetOptions{})
	if err != nil || len(dsa.ImagePullSecrets) != 1 || dsa.AutomountServiceAccountToken == nil || *dsa.AutomountServiceAccountToken {
		t.Errorf("target default ServiceAccount lost the backup's settings: %+v %v", dsa, err)
	}

	// A webhook nobody answers now refuses every ConfigMap CREATE in rr.
	fail := admissionv1.Fail
	none := admissionv1.SideEffectClassNone
	port := int32(443)
	path := "/nowhere"
	_, err = dst.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "down"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name: "down.ferry.test", FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig:      admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "nowhere", Name: "nothing", Path: &path, Port: &port}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "rr"}},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, r := e.restore(t, "rr-again", "rr")
	if r.code != 0 || again.Status.Counts.Created != 0 || again.Status.Counts.Failed != 0 {
		t.Errorf("second restore behind a down webhook: exit %d counts %+v\n%s", r.code, again.Status.Counts, r.stdout)
	}
}

// interruptRestore runs `ferry restore create rr --from-backup rr` into
// the target and sends it SIGINT as soon as a watch has seen n of its
// ConfigMaps appear there. It returns ferry's exit code and stderr.
func interruptRestore(t *testing.T, e *env, dst kubernetes.Interface, n int) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := dst.CoreV1().ConfigMaps("rr").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cmd, stderr, done := startFerry(t, nil, "restore", "create", "rr", "--from-backup", "rr", "--kubeconfig", e.kubeconfig, "--context", "dst", "--storage", e.storage)
	for seen := 0; seen < n; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("the watch of the target's ConfigMaps ended after %d", seen)
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added && strings.HasPrefix(cm.Name, "cm-") {
				seen++
			}
		case <-done:
			t.Fatalf("the restore ended (exit %d) before %d of its ConfigMaps were in the target (%d were)\n%s", cmd.ProcessState.ExitCode(), n, seen, stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-done
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// configMapOutcomes counts the cm-* ConfigMaps a restore created and found unchanged.
func configMapOutcomes(items []map[string]any) (created, unchanged int) {
	for _, it := range items {
		name, _ := it["name"].(string)
		if it["resource"] != "configmaps" || !strings.HasPrefix(name, "cm-") {
			continue
		}
		switch it["outcome"] {
		case "created":
			created++
		case "unchanged":
			unchanged++
		}
	}
	return created, unchanged
}
