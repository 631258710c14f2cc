package nodeagent

import (
	"context"
	"io"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// A location whose URL (or credentials) changed is opened again: the agent
// kept the repository it first opened under the location's name, so a
// `ferry install` with another bucket or a rotated credential Secret went
// on writing to the old bucket, with the old keys, until the agent
// restarted.
func TestRepositoryFollowsLocation(t *testing.T) {
	ctx := context.Background()
	const pw = "agent-test-password"
	dirs := []string{"file://" + t.TempDir(), "file://" + t.TempDir()}
	for _, d := range dirs {
		loc, err := store.Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		repo, err := volumes.Open(ctx, loc, pw, volumes.OpenOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = repo.Close(ctx)
		loc.Close()
	}
	bsl := &v1alpha1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry", Name: "default"}, Spec: v1alpha1.BackupStorageLocationSpec{URL: dirs[0], Default: true}}
	cl := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(bsl).Build()
	a := &Reconciler{Client: cl, APIReader: cl, Opts: Options{Clock: clock.RealClock{}, Password: pw}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	defer a.close()
	first, err := a.repository(ctx, "ferry", "")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := a.repository(ctx, "ferry", ""); err != nil || again != first {
		t.Fatalf("unchanged location: repository %p, %v; want the open one %p", again, err, first)
	}
	bsl.Spec.URL = dirs[1]
	if err := cl.Update(ctx, bsl); err != nil {
		t.Fatal(err)
	}
	moved, err := a.repository(ctx, "ferry", "")
	if err != nil {
		t.Fatal(err)
	}
	if moved == first {
		t.Fatalf("location moved to %s: the agent still uses the repository of %s", dirs[1], dirs[0])
	}
	if got := a.repos["default"].loc.URL(); got != dirs[1] {
		t.Errorf("repository of location %s, want %s", got, dirs[1])
	}
}
