package migration_test

import (
	"testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/report"
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
	}
	for _, c := range cases {
		phase, reason, msg := c.res.Outcome()
		if phase != c.phase || reason != c.reason || msg == "" {
			t.Errorf("%s: %s %s %q, want %s %s", c.name, phase, reason, msg, c.phase, c.reason)
		}
	}
}
