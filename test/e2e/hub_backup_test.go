package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/migration"
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

// checkHubLocationAccess: the hub's own BackupStorageLocation takes what a
// Migration takes (issue 29: everything one front end has, the others
// get). A location on an S3 server whose keys are only in a Credential
// (spec.credentialRef) and with encryption (spec.encryption) is
// Available, while the same bucket with a Credential of wrong keys is
// not; a hub Backup to it is sealed in the bucket; a hub Restore of it
// with spec.verify reads it back with the location's identity, matches
// the source object by object, and counts the verification in its status,
// the report kept in the location.
func checkHubLocationAccess(t *testing.T, c crclient.WithWatch, e *env, namespace string, objs []applied) {
	ctx := context.Background()
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	const bucket = "hub-sealed"
	if err := s3.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []crclient.Object{
		&v1beta1.Credential{ObjectMeta: hubMeta("sealed-s3"), Data: map[string][]byte{store.EnvAWSAccessKeyID: []byte(s3.AccessKey), store.EnvAWSSecretAccessKey: []byte(s3.SecretKey)}},
		&v1beta1.Credential{ObjectMeta: hubMeta("wrong-s3"), Data: map[string][]byte{store.EnvAWSAccessKeyID: []byte(s3.AccessKey), store.EnvAWSSecretAccessKey: []byte("not-the-secret")}},
		&v1beta1.Credential{ObjectMeta: hubMeta("sealed-age"), Data: map[string][]byte{"key.txt": []byte(id.String() + "\n")}},
		&v1beta1.BackupStorageLocation{ObjectMeta: hubMeta("sealed"), Spec: v1beta1.BackupStorageLocationSpec{URL: s3.URL(bucket),
			CredentialRef: &v1beta1.LocalObjectReference{Name: "sealed-s3"}, ValidationFrequency: &metav1.Duration{Duration: 2 * time.Second},
			Encryption: &v1beta1.Encryption{Recipients: []string{id.Recipient().String()}, IdentityRef: &v1beta1.CredentialKeyReference{Name: "sealed-age", Key: "key.txt"}}}},
		&v1beta1.BackupStorageLocation{ObjectMeta: hubMeta("wrong-keys"), Spec: v1beta1.BackupStorageLocationSpec{URL: s3.URL(bucket),
			CredentialRef: &v1beta1.LocalObjectReference{Name: "wrong-s3"}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	loc := waitFor(t, c, &v1beta1.BackupStorageLocation{ObjectMeta: hubMeta("sealed")}, time.Minute, func(l *v1beta1.BackupStorageLocation) bool { return l.Status.Phase != "" })
	wrong := waitFor(t, c, &v1beta1.BackupStorageLocation{ObjectMeta: hubMeta("wrong-keys")}, time.Minute, func(l *v1beta1.BackupStorageLocation) bool { return l.Status.Phase != "" })
	if loc.Status.Phase != v1beta1.LocationAvailable || wrong.Status.Phase != v1beta1.LocationUnavailable || !strings.Contains(wrong.Status.Message, "access denied") ||
		!strings.Contains(wrong.Status.Message, `Credential "wrong-s3" (spec.credentialRef)`) {
		t.Fatalf("locations: sealed %s %q; wrong-keys %s %q; want Available, and Unavailable for access denied with the keys of Credential wrong-s3", loc.Status.Phase, loc.Status.Message, wrong.Status.Phase, wrong.Status.Message)
	}
	// Its Credential fixed, the location is checked again at once (it
	// checks every minute otherwise).
	// Written whole: nobody but the hub's controllers reads credentials.
	cred := &v1beta1.Credential{ObjectMeta: hubMeta("wrong-s3"), Data: map[string][]byte{store.EnvAWSAccessKeyID: []byte(s3.AccessKey), store.EnvAWSSecretAccessKey: []byte(s3.SecretKey)}}
	if err := c.Update(ctx, cred); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, wrong, 20*time.Second, func(l *v1beta1.BackupStorageLocation) bool { return l.Status.Phase == v1beta1.LocationAvailable })

	b := &v1beta1.Backup{ObjectMeta: hubMeta("sealed"), Spec: v1beta1.BackupSpec{Cluster: "src", StorageLocationName: "sealed", IncludedNamespaces: []string{namespace}}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = waitFor(t, c, b, 2*time.Minute, func(b *v1beta1.Backup) bool { return ended(b.Status.Phase) })
	if b.Status.Phase != v1beta1.RunCompleted {
		t.Fatalf("Backup sealed: %+v", b.Status)
	}
	sealed := checkSealed(t, filepath.Join(s3.Dir, bucket, "backups", "sealed"), nil, "ferry-backup.json", "ferry-backup-started.json")
	if !sealed["sealed.tar.gz"] {
		t.Errorf("Backup sealed: the archive is not encrypted in the bucket (sealed: %v)", sealed)
	}

	target := namespace + "-sealed"
	rs := &v1beta1.Restore{ObjectMeta: hubMeta("sealed"), Spec: v1beta1.RestoreSpec{Cluster: "dst", BackupName: "sealed",
		NamespaceMapping: map[string]string{namespace: target}, Verify: true}}
	if err := c.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	rs = waitFor(t, c, rs, 3*time.Minute, func(r *v1beta1.Restore) bool { return ended(r.Status.Phase) })
	v := rs.Status.Verification
	if rs.Status.Phase != v1beta1.RunCompleted || v == nil || v.Objects < int64(len(objs)) || v.Unexpected != 0 || v.Error != "" || len(v.Report) != 2 {
		t.Fatalf("Restore sealed with spec.verify: phase %s, verification %+v (want Completed, at least %d objects compared, nothing unexpected, the report's keys); status %+v",
			rs.Status.Phase, v, len(objs), rs.Status)
	}
	keyFile := filepath.Join(t.TempDir(), "key.txt")
	if err := os.WriteFile(keyFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sealedEnv := *e
	sealedEnv.storage, sealedEnv.storageEnv, sealedEnv.storageArgs = s3.URL(bucket), s3.Env(), []string{"--encryption-identity", keyFile}
	checkTarget(t, &sealedEnv, "sealed", objs, map[string]string{namespace: target})
	// The report is in the bucket, sealed: the location's identity opens it.
	sl, err := store.Open(ctx, s3.URL(bucket), store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}))
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	if _, err := migration.OpenReport(ctx, sl, "sealed", false); !errors.Is(err, store.ErrEncrypted) {
		t.Errorf("the restore's report without the identity: %v, want %v: it is not sealed", err, store.ErrEncrypted)
	}
	enc, err := store.NewEncryption(nil, []age.Identity{id})
	if err != nil {
		t.Fatal(err)
	}
	sl.SetEncryption(enc)
	if raw, err := migration.OpenReport(ctx, sl, "sealed", false); err != nil || !strings.Contains(string(raw), `"summary"`) {
		t.Errorf("the restore's report in the bucket, with the identity: %v (%d bytes)", err, len(raw))
	}
}

// checkHubEvents: the hub records Events on what its controllers run, as
// server mode does in its cluster (pkg/events), in core/v1 Events that
// kubectl describe finds by the involved object: each (kind, name) has
// Events of the given reasons, in order (repeats of one reason, such as a
// location unavailable for another reason, counted once).
func checkHubEvents(t *testing.T, cfg *rest.Config, want map[[2]string][]string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	for obj, reasons := range want {
		sel := "involvedObject.kind=" + obj[0] + ",involvedObject.name=" + obj[1]
		var got []string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			l, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				t.Fatalf("Events of %s %s: %v", obj[0], obj[1], err)
			}
			slices.SortFunc(l.Items, func(a, b corev1.Event) int { return a.FirstTimestamp.Compare(b.FirstTimestamp.Time) })
			got = got[:0]
			for _, e := range l.Items {
				if len(got) == 0 || got[len(got)-1] != e.Reason {
					got = append(got, e.Reason)
				}
			}
			if slices.Equal(got, reasons) {
				break
			}
		}
		if !slices.Equal(got, reasons) {
			t.Errorf("Events of %s %s: reasons %v, want %v", obj[0], obj[1], got, reasons)
		}
	}
}
