package migration_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestOutcome: a migration is Completed only when both steps completed and
// the verification found nothing unexpected.
func TestOutcome(t *testing.T) {
	b := func(p v1alpha1.Phase) *v1alpha1.Backup {
		x := v1alpha1.NewBackup("m")
		x.Status.Phase = p
		return x
	}
	r := func(p v1alpha1.Phase) *v1alpha1.Restore {
		return &v1alpha1.Restore{Status: v1alpha1.RestoreStatus{Phase: p}}
	}
	diff := &report.Verification{Summary: report.Summary{Unexpected: 2}}
	errs := &report.Verification{Errors: []string{"list x: forbidden"}}
	notRunning := &report.Verification{Running: report.NewRunning([]report.Check{
		{Kind: report.KindWorkload, Resource: "Deployment", Namespace: "shop", Name: "web", Outcome: "not running", Reason: "ImagePullBackOff", Message: "image reg/web:1: not found"}})}
	cases := []struct {
		name   string
		res    migration.Result
		phase  v1alpha1.Phase
		reason string
	}{
		{"no backup", migration.Result{}, v1alpha1.PhaseFailed, "BackupFailed"},
		{"backup failed", migration.Result{Backup: b(v1alpha1.PhaseFailed)}, v1alpha1.PhaseFailed, "BackupFailed"},
		{"no restore", migration.Result{Backup: b(v1alpha1.PhaseCompleted)}, v1alpha1.PhaseFailed, "RestoreFailed"},
		{"restore failed", migration.Result{Backup: b(v1alpha1.PhaseCompleted), Restore: r(v1alpha1.PhaseFailed)}, v1alpha1.PhaseFailed, "RestoreFailed"},
		{"backup partial", migration.Result{Backup: b(v1alpha1.PhasePartiallyFailed), Restore: r(v1alpha1.PhaseCompleted)}, v1alpha1.PhasePartiallyFailed, "BackupPartiallyFailed"},
		{"restore partial", migration.Result{Backup: b(v1alpha1.PhaseCompleted), Restore: r(v1alpha1.PhasePartiallyFailed)}, v1alpha1.PhasePartiallyFailed, "RestorePartiallyFailed"},
		{"differences", migration.Result{Backup: b(v1alpha1.PhaseCompleted), Restore: r(v1alpha1.PhaseCompleted), Verification: diff}, v1alpha1.PhasePartiallyFailed, "VerificationFoundDifferences"},
		{"verify errors", migration.Result{Backup: b(v1alpha1.PhaseCompleted), Restore: r(v1alpha1.PhaseCompleted), Verification: errs}, v1alpha1.PhasePartiallyFailed, "VerificationErrors"},
		{"completed", migration.Result{Backup: b(v1alpha1.PhaseCompleted), Restore: r(v1alpha1.PhaseCompleted), Verification: &report.Verification{}}, v1alpha1.PhaseCompleted, "Completed"},
		{"runtime checks failed", migration.Result{Backup: b(v1alpha1.PhaseCompleted), Restore: r(v1alpha1.PhaseCompleted), Verification: notRunning}, v1alpha1.PhasePartiallyFailed, "RuntimeChecksFailed"},
		{"runtime checks skipped", migration.Result{Backup: b(v1alpha1.PhaseCompleted), Restore: r(v1alpha1.PhaseCompleted), Verification: &report.Verification{Running: &report.Running{Skipped: "spec.verifyRuntime.skip is set"}}}, v1alpha1.PhaseCompleted, "Completed"},
	}
	for _, c := range cases {
		phase, reason, msg := c.res.Outcome()
		if phase != c.phase || reason != c.reason || msg == "" {
			t.Errorf("%s: %s %s %q, want %s %s", c.name, phase, reason, msg, c.phase, c.reason)
		}
	}
	// Completed says what was, and was not, shown (a new user's finding:
	// a dry run and an unverified migration said "the target matches").
	dry := r(v1alpha1.PhaseCompleted)
	dry.Spec.DryRun = true
	for _, c := range []struct {
		name string
		res  migration.Result
		want string
	}{
		{"verified", migration.Result{Backup: b(v1alpha1.PhaseCompleted), Restore: r(v1alpha1.PhaseCompleted), Verification: &report.Verification{}}, "the target matches the backup"},
		{"not verified", migration.Result{Backup: b(v1alpha1.PhaseCompleted), Restore: r(v1alpha1.PhaseCompleted)}, "the target was not verified"},
		{"dry run", migration.Result{Backup: b(v1alpha1.PhaseCompleted), Restore: dry}, "nothing was written to the target"},
	} {
		if _, _, msg := c.res.Outcome(); !strings.Contains(msg, c.want) {
			t.Errorf("%s: %q, want %q", c.name, msg, c.want)
		}
	}
}

// TestValidateName: a migration's name must be its backup's and its
// restore's, for `ferry migrate --name` and a hub Migration alike.
func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"shop-move", true},
		{strings.Repeat("a", store.MaxBackupNameLength), true},
		{strings.Repeat("a", store.MaxBackupNameLength+1), false},
		{"Shop", false},
		{"", false},
		{"..", false},
	} {
		if err := migration.ValidateName(tc.name); (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestCheckClustersSameHost: one API server is one cluster, without asking
// it (the kube-system UID case needs a real one: test/e2e
// checkSameCluster).
func TestCheckClustersSameHost(t *testing.T) {
	a := &kube.Cluster{Name: "a", Config: &rest.Config{Host: "https://127.0.0.1:6443"}}
	b := &kube.Cluster{Name: "b", Config: &rest.Config{Host: "https://127.0.0.1:6443"}}
	if err := migration.CheckClusters(context.Background(), a, b); !errors.Is(err, migration.ErrSameCluster) || !strings.Contains(err.Error(), "source a (https://127.0.0.1:6443)") {
		t.Errorf("same host: %v", err)
	}
}
