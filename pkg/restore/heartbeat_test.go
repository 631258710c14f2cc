package restore

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestHeartbeat: a running restore's record is InProgress with a moving
// heartbeat, which a later run of the same name takes for alive; once the
// heartbeat stops (the run was killed), the later run takes it for
// interrupted; Interrupted shows it after a minute.
func TestHeartbeat(t *testing.T) {
	defer func(i, s time.Duration) { HeartbeatInterval, HeartbeatStale = i, s }(HeartbeatInterval, HeartbeatStale)
	HeartbeatInterval, HeartbeatStale = 300*time.Millisecond, 2*time.Second
	ctx := context.Background()
	loc, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	r := v1alpha1.NewRestore("r1")
	r.UID = "uid-1"
	start := metav1.Now()
	r.Status.StartTimestamp = &start
	hb, err := startHeartbeat(ctx, loc, r)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := loc.GetRestore(ctx, "r1")
	if err != nil || prev.Status.Phase != v1alpha1.PhaseInProgress || prev.Status.HeartbeatTime == nil {
		t.Fatalf("record of a running restore: %+v %v", prev, err)
	}
	if _, err := awaitEarlierRun(ctx, loc, "r1", prev); err == nil || !strings.Contains(err.Error(), "is running elsewhere") {
		t.Fatalf("a live run: %v, want it named as running", err)
	}
	hb.Stop() // as a SIGKILL leaves it
	prev, _ = loc.GetRestore(ctx, "r1")
	got, err := awaitEarlierRun(ctx, loc, "r1", prev)
	if err != nil || got.UID != "uid-1" || got.Status.Phase != v1alpha1.PhaseInProgress {
		t.Fatalf("a killed run: %+v %v, want its record back to finish it", got, err)
	}
	if Interrupted(got, time.Now()) {
		t.Errorf("Interrupted right after the last heartbeat")
	}
	if !Interrupted(got, time.Now().Add(2*time.Minute)) {
		t.Errorf("not Interrupted two minutes after the last heartbeat")
	}
	got.Status.Phase = v1alpha1.PhaseFailed
	if Interrupted(got, time.Now().Add(time.Hour)) {
		t.Errorf("a Failed restore shown as interrupted")
	}
}

// TestHolderGone: a record held by a process of this machine that has
// exited is known to be interrupted at once; one held by a live process,
// or by another machine, is not.
func TestHolderGone(t *testing.T) {
	r := v1alpha1.NewRestore("r1")
	r.Annotations = map[string]string{AnnotationHolder: holderID(os.Getpid())}
	if holderGone(r) {
		t.Errorf("this live process taken for gone")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	r.Annotations[AnnotationHolder] = holderID(cmd.Process.Pid)
	if !holderGone(r) {
		t.Errorf("an exited process (pid %d) not taken for gone", cmd.Process.Pid)
	}
	r.Annotations[AnnotationHolder] = "another-host/pid:[1]/" + strconv.Itoa(cmd.Process.Pid)
	if holderGone(r) {
		t.Errorf("a process of another machine taken for gone")
	}
}
