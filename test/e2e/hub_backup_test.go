package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/store"
)

// hubBackupKinds is the part of TestHubMigration that runs the kinds of
// server mode through the hub, on its clusters: it starts with a
// Schedule (every minute) and a default BackupStorageLocation, before the
// Migration runs, and is checked by checkHubBackupKinds after it.
type hubBackupKinds struct {
	c         crclient.WithWatch
	e         *env
	namespace string
	objs      []applied
}

var hubMeta = func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "default", Name: name} }

func startHubBackupKinds(t *testing.T, c crclient.WithWatch, e *env, namespace string, objs []applied) *hubBackupKinds {
	t.Helper()
	ctx := context.Background()
	for _, o := range []crclient.Object{
		// Checked, and synced, every 2s.
		&v1beta1.BackupStorageLocation{ObjectMeta: hubMeta("primary"), Spec: v1beta1.BackupStorageLocationSpec{URL: e.storage, Default: true,
			ValidationFrequency: &metav1.Duration{Duration: 2 * time.Second}}},
		// A store that refuses connections: Unavailable, and Backups to it fail.
		&v1beta1.BackupStorageLocation{ObjectMeta: hubMeta("broken"), Spec: v1beta1.BackupStorageLocationSpec{URL: "s3://no-bucket?endpoint=http://127.0.0.1:1&region=us-east-1&use_path_style=true"}},
		&v1beta1.Schedule{ObjectMeta: hubMeta("minutely"), Spec: v1beta1.ScheduleSpec{Schedule: "* * * * *",
			Template: v1beta1.BackupSpec{Cluster: "src", IncludedNamespaces: []string{namespace}}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	return &hubBackupKinds{c: c, e: e, namespace: namespace, objs: objs}
}

// waitFor polls obj until done says so, or fails after timeout.
func waitFor[T crclient.Object](t *testing.T, c crclient.Client, obj T, timeout time.Duration, done func(T) bool) T {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := c.Get(context.Background(), crclient.ObjectKeyFromObject(obj), obj); err == nil && done(obj) {
			return obj
		}
	}
	t.Fatalf("%T %s: not done within %s: %+v", obj, obj.GetName(), timeout, obj)
	return obj
}

func ended(p v1beta1.RunPhase) bool {
	return p == v1beta1.RunCompleted || p == v1beta1.RunPartiallyFailed || p == v1beta1.RunFailed
}

// check runs a Backup of the corpus namespace, restores it into dst under
// another namespace and compares it object by object; checks the
// locations' status, a Backup to the unavailable location, the expiry of
// a Backup with a TTL, and the Backup the Schedule made.
func (k *hubBackupKinds) check(t *testing.T) {
	ctx := context.Background()
	c := k.c
	loc := waitFor(t, c, &v1beta1.BackupStorageLocation{ObjectMeta: hubMeta("primary")}, time.Minute, func(l *v1beta1.BackupStorageLocation) bool { return l.Status.Phase != "" })
	broken := waitFor(t, c, &v1beta1.BackupStorageLocation{ObjectMeta: hubMeta("broken")}, time.Minute, func(l *v1beta1.BackupStorageLocation) bool { return l.Status.Phase != "" })
	if loc.Status.Phase != v1beta1.LocationAvailable || broken.Status.Phase != v1beta1.LocationUnavailable || !strings.Contains(broken.Status.Message, "s3://no-bucket") {
		t.Errorf("locations: primary %s; broken %s %q; want Available, and Unavailable naming the location", loc.Status.Phase, broken.Status.Phase, broken.Status.Message)
	}

	b := &v1beta1.Backup{ObjectMeta: hubMeta("guestbook"), Spec: v1beta1.BackupSpec{Cluster: "src", IncludedNamespaces: []string{k.namespace}}}
	short := &v1beta1.Backup{ObjectMeta: hubMeta("short-lived"), Spec: v1beta1.BackupSpec{Cluster: "src", IncludedNamespaces: []string{k.namespace}, TTL: &metav1.Duration{Duration: 3 * time.Second}}}
	nowhere := &v1beta1.Backup{ObjectMeta: hubMeta("to-broken"), Spec: v1beta1.BackupSpec{Cluster: "src", StorageLocationName: "broken"}}
	for _, o := range []*v1beta1.Backup{b, short, nowhere} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	b = waitFor(t, c, b, 2*time.Minute, func(b *v1beta1.Backup) bool { return ended(b.Status.Phase) })
	st := b.Status
	if st.Phase != v1beta1.RunCompleted || st.StorageLocation != k.e.storage || st.Progress.ItemsBackedUp == 0 || st.Lease != nil || st.CompletionTimestamp == nil ||
		!meta.IsStatusConditionTrue(st.Conditions, v1beta1.ConditionSucceeded) {
		t.Fatalf("Backup guestbook: %+v", st)
	}
	nowhere = waitFor(t, c, nowhere, time.Minute, func(b *v1beta1.Backup) bool { return ended(b.Status.Phase) })
	if cond := meta.FindStatusCondition(nowhere.Status.Conditions, v1beta1.ConditionSucceeded); nowhere.Status.Phase != v1beta1.RunFailed || cond == nil || cond.Reason != "LocationUnavailable" || !strings.Contains(nowhere.Status.FailureReason, `"broken"`) {
		t.Errorf("Backup to the broken location: %s %+v %q; want Failed, LocationUnavailable naming it", nowhere.Status.Phase, cond, nowhere.Status.FailureReason)
	}

	r := &v1beta1.Restore{ObjectMeta: hubMeta("guestbook"), Spec: v1beta1.RestoreSpec{Cluster: "dst", BackupName: "guestbook",
		NamespaceMapping: map[string]string{k.namespace: k.namespace + "-hub"}}}
	if err := c.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	r = waitFor(t, c, r, 2*time.Minute, func(r *v1beta1.Restore) bool { return ended(r.Status.Phase) })
	if r.Status.Phase != v1beta1.RunCompleted || r.Status.Counts.Created == 0 || r.Status.Counts.Failed != 0 || r.Status.Lease != nil {
		t.Fatalf("Restore guestbook: %+v", r.Status)
	}
	checkTarget(t, k.e, "guestbook", k.objs, map[string]string{k.namespace: k.namespace + "-hub"})

	k.checkExpired(t, short)
	k.checkSynced(t)
	k.checkScheduled(t)
}

// checkSynced is store sync into the hub: a backup the CLI took into the
// hub's location appears as a hub Backup of it (never run), and a hub
// Restore of it into dst, under another namespace, gives the source's
// objects, checked object by object.
func (k *hubBackupKinds) checkSynced(t *testing.T) {
	ctx := context.Background()
	k.e.backup(t, "cli-taken", "--include-namespaces", k.namespace)
	b := waitFor(t, k.c, &v1beta1.Backup{ObjectMeta: hubMeta("cli-taken")}, time.Minute, func(b *v1beta1.Backup) bool { return b.Status.Phase != "" && b.Status.Phase != v1beta1.RunNew })
	if b.Status.Phase != v1beta1.RunCompleted || b.Labels["ferry.dev/synced-from"] != "primary" || b.Spec.Cluster != "" ||
		b.Status.StorageLocation != k.e.storage || b.Status.Progress.ItemsBackedUp == 0 || !slices.Equal(b.Spec.IncludedNamespaces, []string{k.namespace}) {
		t.Fatalf("synced Backup cli-taken: labels %v, spec %+v, status %+v", b.Labels, b.Spec, b.Status)
	}
	mapping := map[string]string{k.namespace: k.namespace + "-synced"}
	r := &v1beta1.Restore{ObjectMeta: hubMeta("cli-taken"), Spec: v1beta1.RestoreSpec{Cluster: "dst", BackupName: "cli-taken", NamespaceMapping: mapping}}
	if err := k.c.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	r = waitFor(t, k.c, r, 2*time.Minute, func(r *v1beta1.Restore) bool { return ended(r.Status.Phase) })
	if r.Status.Phase != v1beta1.RunCompleted || r.Status.Counts.Created == 0 || r.Status.Counts.Failed != 0 {
		t.Fatalf("hub Restore of the synced backup: %+v", r.Status)
	}
	checkTarget(t, k.e, "cli-taken", k.objs, mapping)
}

// checkExpired: a Backup past its TTL leaves the location and the hub.
func (k *hubBackupKinds) checkExpired(t *testing.T, b *v1beta1.Backup) {
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		err := k.c.Get(ctx, crclient.ObjectKeyFromObject(b), b)
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Backup %s with a 3s TTL is still in the hub after a minute: %v %+v", b.Name, err, b.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	loc, err := store.Open(ctx, k.e.storage)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	if _, err := loc.GetBackup(ctx, b.Name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the expired backup's folder: %v, want it gone", err)
	}
	if _, err := loc.GetBackup(ctx, "guestbook"); err != nil {
		t.Errorf("the backup without a TTL: %v, want it kept", err)
	}
}

// checkScheduled: the Schedule made a Backup named after the minute it was
// due, labelled with it, and it completed.
func (k *hubBackupKinds) checkScheduled(t *testing.T) {
	ctx := context.Background()
	s := waitFor(t, k.c, &v1beta1.Schedule{ObjectMeta: hubMeta("minutely")}, 90*time.Second, func(s *v1beta1.Schedule) bool { return s.Status.LastBackup != nil })
	if s.Status.Phase != v1beta1.ScheduleEnabled || s.Status.NextBackup == nil || !s.Status.NextBackup.After(s.Status.LastBackup.Time) {
		t.Errorf("Schedule status %+v", s.Status)
	}
	name := "minutely-" + s.Status.LastBackup.UTC().Format("20060102150405")
	b := waitFor(t, k.c, &v1beta1.Backup{ObjectMeta: hubMeta(name)}, 2*time.Minute, func(b *v1beta1.Backup) bool { return ended(b.Status.Phase) })
	if b.Labels[v1beta1.LabelSchedule] != "minutely" || b.Status.Phase != v1beta1.RunCompleted || b.Spec.Cluster != "src" {
		t.Errorf("scheduled Backup %s: labels %v, phase %s, cluster %s", name, b.Labels, b.Status.Phase, b.Spec.Cluster)
	}
	// Paused: no more Backups, and no next time.
	patch := crclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`))
	if err := k.c.Patch(ctx, s, patch); err != nil {
		t.Fatal(err)
	}
	s = waitFor(t, k.c, s, 30*time.Second, func(s *v1beta1.Schedule) bool { return s.Status.Phase == v1beta1.SchedulePaused })
	if s.Status.NextBackup != nil {
		t.Errorf("paused Schedule's nextBackup: %v", s.Status.NextBackup)
	}
}
