package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// handedWatches is an in-process client whose watches the test drives.
type handedWatches struct {
	crclient.WithWatch
	watches chan *watch.FakeWatcher
}

func (c *handedWatches) Watch(context.Context, crclient.ObjectList, ...crclient.ListOption) (watch.Interface, error) {
	w := watch.NewFake()
	c.watches <- w
	return w, nil
}

// TestMigrationWatchRewatches: a watch whose channel closes, or that ends
// with an error event (an expired resourceVersion), is followed by another
// get and watch; each phase is reported once.
func TestMigrationWatchRewatches(t *testing.T) {
	s, err := hubScheme()
	if err != nil {
		t.Fatal(err)
	}
	m := &hubv1beta1.Migration{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default"}, Status: hubv1beta1.MigrationStatus{Phase: hubv1beta1.PhasePending}}
	c := &handedWatches{WithWatch: fake.NewClientBuilder().WithScheme(s).WithObjects(m).Build(), watches: make(chan *watch.FakeWatcher)}
	var phases []string
	w := &migrationWatch{c: c, key: crclient.ObjectKeyFromObject(m), onPhase: func(p hubv1beta1.MigrationPhase) { phases = append(phases, string(p)) }}
	type result struct {
		m   *hubv1beta1.Migration
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := w.run(context.Background(), time.Minute)
		done <- result{m, err}
	}()
	with := func(p hubv1beta1.MigrationPhase) *hubv1beta1.Migration {
		o := m.DeepCopy()
		o.Status.Phase = p
		return o
	}
	w1 := <-c.watches
	w1.Modify(with(hubv1beta1.PhaseBackup))
	// The phase moves on while no watch is open: the next get sees it.
	cur := &hubv1beta1.Migration{}
	if err := c.Get(context.Background(), crclient.ObjectKeyFromObject(m), cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = hubv1beta1.PhaseRestore
	if err := c.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	w1.Stop()
	w2 := <-c.watches
	w2.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	w3 := <-c.watches
	w3.Modify(with(hubv1beta1.PhaseRestore))
	w3.Modify(with(hubv1beta1.PhasePartiallyFailed))
	r := <-done
	if r.err != nil || r.m.Status.Phase != hubv1beta1.PhasePartiallyFailed {
		t.Fatalf("run: %v, %+v", r.err, r.m)
	}
	if got, want := strings.Join(phases, " "), "Pending Backup Restore PartiallyFailed"; got != want {
		t.Errorf("phases %q; want %q", got, want)
	}
}

// TestMigrationWatchTimeout: at --wait-timeout the wait ends with the last
// phase seen; the Migration goes on in the hub.
func TestMigrationWatchTimeout(t *testing.T) {
	s, err := hubScheme()
	if err != nil {
		t.Fatal(err)
	}
	m := &hubv1beta1.Migration{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default"}, Status: hubv1beta1.MigrationStatus{Phase: hubv1beta1.PhaseBackup}}
	c := &handedWatches{WithWatch: fake.NewClientBuilder().WithScheme(s).WithObjects(m).Build(), watches: make(chan *watch.FakeWatcher, 10)}
	w := &migrationWatch{c: c, key: crclient.ObjectKeyFromObject(m), onPhase: func(hubv1beta1.MigrationPhase) {}}
	_, err = w.run(context.Background(), 300*time.Millisecond)
	if want := "migration m: still Backup after --wait-timeout 300ms; it goes on in the hub"; err == nil || err.Error() != want {
		t.Errorf("run: %v; want %q", err, want)
	}
}
