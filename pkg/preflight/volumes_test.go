package preflight

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// TestCheckRepository: the probe opens the location's volume repository
// with the helpers' password first. A wrong password is a blocker (found
// by a reviewer: a pre-flight with a wrong password passed, and the
// restore then moved no data); so is a missing repository when a stored
// backup's data is to come from it; a live move creates it.
func TestCheckRepository(t *testing.T) {
	ctx := context.Background()
	loc, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	e := newTestEnv(t)
	if err := e.checkRepository(ctx, loc, "right", true); err != nil || len(e.p.Risks) != 0 {
		t.Fatalf("no repository, live: %v, risks %+v; want neither", err, e.p.Risks)
	}
	if err := e.checkRepository(ctx, loc, "right", false); err == nil || len(e.p.Risks) != 1 || e.p.Risks[0].Severity != report.Blocker {
		t.Fatalf("no repository, stored backup: %v, risks %+v; want a blocker", err, e.p.Risks)
	}
	repo, err := volumes.Open(ctx, loc, "right", volumes.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = repo.Close(ctx)
	e = newTestEnv(t)
	if err := e.checkRepository(ctx, loc, "right", false); err != nil || len(e.p.Risks) != 0 {
		t.Fatalf("the right password: %v, risks %+v", err, e.p.Risks)
	}
	err = e.checkRepository(ctx, loc, "wrong", true)
	if err == nil || len(e.p.Risks) != 1 || e.p.Risks[0].Severity != report.Blocker || !strings.Contains(e.p.Risks[0].What, "wrong repository password") {
		t.Fatalf("a wrong password: %v, risks %+v; want a blocker saying so", err, e.p.Risks)
	}
}

// TestProbeFileLocationWritesNothing: helper pods cannot reach a file://
// location, so the probe fails before it opens the location, and the
// location's folder is not created (found by a reviewer: the clean-up's
// open created it).
func TestProbeFileLocationWritesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "loc")
	e := newTestEnv(t)
	c := &kube.Cluster{Name: "c", Typed: fake.NewClientset()}
	e.o.Source, e.o.Target = c, c
	vp := &VolumeProbe{URL: "file://" + dir, Source: helperpod.Settings{Password: "pw", Image: "ferry"}, Target: helperpod.Settings{Password: "pw", Image: "ferry"}}
	_, _, err := e.probeVolumes(context.Background(), vp, &volumeLoad{volumes: 1, bytes: 1, sourceNS: "a", targetNS: "a"}, true)
	if err == nil || !strings.Contains(err.Error(), "cannot reach a file:// location") {
		t.Fatalf("probe through a file:// location: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the location's folder exists after the failed probe: %v", err)
	}
}
