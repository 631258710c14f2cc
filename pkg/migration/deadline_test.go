package migration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestVerifyAndRecordDeadline: the verification after a restore (restore
// create --verify, a Restore's spec.verify) that does not end within its
// deadline makes the restore PartiallyFailed, naming the field, and is
// recorded in the location.
func TestVerifyAndRecordDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	c, err := testenv.StartCluster(ctx, t, "c")
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := kube.Connect(ctx, "c", c.Config)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	spec := v1alpha1.BackupSpec{IncludedNamespaces: []string{"default"}, IncludeClusterResources: "false"}
	if _, _, err := backup.Run(ctx, cluster, loc, backup.Options{Name: "b", Spec: spec}); err != nil {
		t.Fatal(err)
	}
	ropts := restore.Options{Name: "r", Spec: v1alpha1.RestoreSpec{BackupName: "b"},
		VerifyDeadline: deadline.Deadline{After: time.Nanosecond, Field: "--verify-timeout"}}
	rs, _, err := restore.Run(ctx, cluster, loc, ropts)
	if err != nil || rs.Status.Phase != v1alpha1.PhaseCompleted {
		t.Fatalf("restore: %v, %+v", err, rs)
	}
	if err := VerifyAndRecord(ctx, cluster, loc, ropts, rs, nil); err != nil {
		t.Fatal(err)
	}
	want := "--verify-timeout: the verification did not end within 1ns"
	if rs.Status.Phase != v1alpha1.PhasePartiallyFailed || !strings.Contains(rs.Status.FailureReason, want) {
		t.Errorf("the restore after a verification past its deadline: %s, %q; want PartiallyFailed naming %q", rs.Status.Phase, rs.Status.FailureReason, want)
	}
	stored, err := loc.GetRestore(ctx, "r")
	if err != nil || stored.Status.Verification == nil || !strings.Contains(stored.Status.Verification.Error, want) {
		t.Errorf("the recorded restore: %v, %+v; want its verification's error", err, stored)
	}
}
