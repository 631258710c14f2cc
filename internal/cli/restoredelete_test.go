package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestRestoreDeleteRunning: restore delete refuses a restore whose record
// is InProgress with a fresh heartbeat (its run is alive and would put the
// record back without its results), and deletes one whose heartbeat
// stopped over a minute ago (Interrupted).
func TestRestoreDeleteRunning(t *testing.T) {
	ctx := context.Background()
	url := "file://" + t.TempDir()
	loc, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	put := func(beat time.Time) {
		r := v1alpha1.NewRestore("r1")
		r.Status.Phase = v1alpha1.PhaseInProgress
		hb := metav1.NewTime(beat)
		r.Status.StartTimestamp, r.Status.HeartbeatTime = &hb, &hb
		if err := loc.PutJSON(ctx, store.RestoreDir("r1")+store.RestoreMarker, r); err != nil {
			t.Fatal(err)
		}
	}
	put(time.Now())
	var out, errb bytes.Buffer
	if code := Main([]string{"restore", "delete", "r1", "--storage", url}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "restore r1 is running") {
		t.Fatalf("delete of a running restore: exit %d, %s", code, errb.String())
	}
	if _, err := loc.GetRestore(ctx, "r1"); err != nil {
		t.Fatalf("the running restore's record was deleted: %v", err)
	}
	put(time.Now().Add(-2 * time.Minute))
	out.Reset()
	errb.Reset()
	if code := Main([]string{"restore", "delete", "r1", "--storage", url}, &out, &errb); code != 0 {
		t.Fatalf("delete of an interrupted restore: exit %d, %s", code, errb.String())
	}
}
