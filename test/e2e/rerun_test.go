package e2e

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestRerun covers re-running restores: after SIGINT (the record says
// interrupted) the same name finishes the job; a second restore is all
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

	// SIGINT half way, then the same command again.
	cmd := exec.Command(ferryBin, "restore", "create", "rr", "--from-backup", "rr", "--kubeconfig", e.kubeconfig, "--context", "dst", "--storage", e.storage)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	t.Logf("interrupted restore exited %d", code)
	rs, r := e.restore(t, "rr", "rr")
	if r.code != 0 || rs.Status.Phase != "Completed" {
		t.Fatalf("re-run after SIGINT: exit %d phase %s\n%s\n%s", r.code, rs.Status.Phase, r.stdout, r.stderr)
	}
	if got := len(sourceData(t, dst, "rr")); got != 1500 {
		t.Errorf("target has %d ConfigMaps after the re-run, want 1500", got)
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
