package migration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestPrepare: a migration run again under its name resumes when its
// backup is committed and its restore did not record an outcome other
// than Failed (issue 28); it is refused, with the reason, otherwise.
func TestPrepare(t *testing.T) {
	ctx := context.Background()
	loc, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.BackupSpec{IncludedNamespaces: []string{"shop"}}
	if b, err := Prepare(ctx, loc, "m1", spec); b != nil || err != nil {
		t.Fatalf("a new migration: %v %v, want a fresh start", b, err)
	}
	// Interrupted during its backup: Incomplete, not resumable.
	if err := loc.PutJSON(ctx, store.BackupDir("m1")+store.BackupStartedMarker, v1alpha1.NewBackup("m1")); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(ctx, loc, "m1", spec); err == nil || !strings.Contains(err.Error(), "Incomplete") || !strings.Contains(err.Error(), "ferry backup delete m1 --storage "+loc.URL()) {
		t.Fatalf("Incomplete backup: %v", err)
	}
	// Committed: reused when its restore was killed (InProgress) or
	// interrupted (Failed).
	b := v1alpha1.NewBackup("m1")
	b.Spec = spec
	b.Spec.StorageLocation = loc.URL()
	b.Status.Phase = v1alpha1.PhaseCompleted
	if err := loc.PutJSON(ctx, store.BackupDir("m1")+store.BackupMarker, b); err != nil {
		t.Fatal(err)
	}
	// No restore ran: the backup may be another's or old; not resumed.
	if _, err := Prepare(ctx, loc, "m1", spec); err == nil || !strings.Contains(err.Error(), "no restore of that name ran") || !strings.Contains(err.Error(), "ferry restore create m1 --from-backup m1") {
		t.Errorf("committed backup, no restore: %v", err)
	}
	for _, phase := range []v1alpha1.Phase{v1alpha1.PhaseInProgress, v1alpha1.PhaseFailed, v1alpha1.PhasePartiallyFailed} {
		r := v1alpha1.NewRestore("m1")
		r.Status.Phase = phase
		if err := loc.PutJSON(ctx, store.RestoreDir("m1")+store.RestoreMarker, r); err != nil {
			t.Fatal(err)
		}
		if got, err := Prepare(ctx, loc, "m1", spec); err != nil || got == nil || got.Name != "m1" {
			t.Errorf("restore %q: %v %v, want the backup reused", phase, got, err)
		}
	}
	// Another selection: not resumed.
	if _, err := Prepare(ctx, loc, "m1", v1alpha1.BackupSpec{IncludedNamespaces: []string{"other"}}); err == nil || !strings.Contains(err.Error(), "spec.includedNamespaces differs") {
		t.Errorf("another spec: %v", err)
	}
	// Done: refused.
	r := v1alpha1.NewRestore("m1")
	r.Status.Phase = v1alpha1.PhaseCompleted
	if err := loc.PutJSON(ctx, store.RestoreDir("m1")+store.RestoreMarker, r); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(ctx, loc, "m1", spec); !errors.Is(err, ErrDone) {
		t.Errorf("a migration that ran: %v, want ErrDone", err)
	}
}
