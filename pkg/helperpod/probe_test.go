package helperpod

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// A probe job uploads its data set into the location's repository and a
// second one downloads and walks it, each saying how long the data took;
// a job with nothing to do, or a snapshot the repository has not, is an
// error in the outcome.
func TestProbeJob(t *testing.T) {
	ctx := context.Background()
	t.Setenv(store.EnvStorage, "file://"+t.TempDir())
	t.Setenv(volumes.EnvPassword, "probe-password")
	t.Setenv("TMPDIR", t.TempDir())
	up := RunJob(ctx, Job{Op: OpProbe, Probe: &ProbeJob{Bytes: 20 << 20}}, io.Discard)
	if up.Error != "" || up.Probe == nil {
		t.Fatalf("upload: %+v", up)
	}
	if up.Probe.Bytes != 20<<20 || up.Probe.SnapshotID == "" || up.Probe.MoveSeconds <= 0 {
		t.Fatalf("upload measured %+v; want 20 MiB, a snapshot and its time", up.Probe)
	}
	t.Setenv("TMPDIR", t.TempDir()) // the target pod's own emptyDir
	down := RunJob(ctx, Job{Op: OpProbe, Probe: &ProbeJob{SnapshotID: up.Probe.SnapshotID}}, io.Discard)
	if down.Error != "" || down.Probe == nil {
		t.Fatalf("download: %+v", down)
	}
	if down.Probe.Bytes != 20<<20 || down.Probe.MoveSeconds <= 0 || down.Probe.WalkSeconds <= 0 {
		t.Fatalf("download measured %+v; want 20 MiB, the restore's and the walk's time", down.Probe)
	}
	// Files of the volumes' average size: 2 MiB of 64 KiB is 32 files.
	t.Setenv("TMPDIR", t.TempDir())
	small := RunJob(ctx, Job{Op: OpProbe, Probe: &ProbeJob{Bytes: 2 << 20, FileSize: 64 << 10}}, io.Discard)
	if small.Error != "" || small.Probe == nil || small.Probe.Files != 32 || small.Probe.Bytes != 2<<20 {
		t.Fatalf("upload of 64 KiB files: %+v %+v", small, small.Probe)
	}
	for _, job := range []Job{{Op: OpProbe}, {Op: OpProbe, Probe: &ProbeJob{}}} {
		if out := RunJob(ctx, job, io.Discard); !strings.Contains(out.Error, "needs bytes to upload or a snapshot") {
			t.Errorf("%+v: outcome %+v, want the job refused", job, out)
		}
	}
	out := RunJob(ctx, Job{Op: OpProbe, Probe: &ProbeJob{SnapshotID: "k0123456789abcdef0123456789abcdef"}}, io.Discard)
	if out.Error == "" {
		t.Errorf("a snapshot the repository has not: outcome %+v, want an error", out)
	}
}
