package servermode_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/schedule"
	"github.com/kubeferry/ferry/pkg/servermode"
	"github.com/kubeferry/ferry/pkg/store"
)

const ns = "ferry"

// site is one cluster with ferry's CRDs, namespace and a default location.
type site struct {
	c       *testenv.Cluster
	cl      client.Client
	cancel  context.CancelFunc
	stopped chan struct{}
}

func setupSite(t *testing.T, c *testenv.Cluster, s3 *testenv.S3, bucketURL string) *site {
	t.Helper()
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crds, _ := filepath.Glob(filepath.Join(root, "config", "crd", "*.yaml"))
	if _, err := testenv.Apply(ctx, c.Config, "", crds...); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: servermode.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	must(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, cl.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		StringData: map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}}))
	must(t, cl.Create(ctx, &v1alpha1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: v1alpha1.BackupStorageLocationSpec{URL: bucketURL, Credential: &v1alpha1.SecretReference{Name: "creds"}, Default: true}}))
	return &site{c: c, cl: cl}
}

// start runs the server in-process against the site until stop.
func (s *site) start(t *testing.T, opts servermode.Options) {
	t.Helper()
	opts.Namespace, opts.Config, opts.SeveralPerProcess = ns, s.c.Config, true
	if opts.MetricsAddr == "" {
		opts.MetricsAddr = "0"
	}
	if opts.ProbeAddr == "" {
		opts.ProbeAddr = "0"
	}
	opts.SyncPeriod, opts.ValidationPeriod, opts.MaxWait = time.Second, time.Second, 200*time.Millisecond
	opts.Log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := servermode.NewManager(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s.cancel, s.stopped = cancel, make(chan struct{})
	go func() {
		defer close(s.stopped)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("server %s: %v", s.c.Name, err)
		}
	}()
	t.Cleanup(s.stop)
}

func (s *site) stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.stopped
		s.cancel = nil
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls f every 100ms until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v after %s", what, err, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitBackup(t *testing.T, s *site, name string, timeout time.Duration, phases ...v1alpha1.Phase) *v1alpha1.Backup {
	t.Helper()
	b := &v1alpha1.Backup{}
	eventually(t, timeout, "backup "+name, func() error {
		if err := s.cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
			return err
		}
		for _, p := range phases {
			if b.Status.Phase == p {
				return nil
			}
		}
		return fmt.Errorf("phase %q (%s), want %v", b.Status.Phase, b.Status.FailureReason, phases)
	})
	return b
}

func waitRestore(t *testing.T, s *site, name string, phases ...v1alpha1.Phase) *v1alpha1.Restore {
	t.Helper()
	r := &v1alpha1.Restore{}
	eventually(t, 60*time.Second, "restore "+name, func() error {
		if err := s.cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
			return err
		}
		for _, p := range phases {
			if r.Status.Phase == p {
				return nil
			}
		}
		return fmt.Errorf("phase %q (%s), want %v", r.Status.Phase, r.Status.FailureReason, phases)
	})
	return r
}

// storeSynced returns once store sync has run on s, from start to end,
// after the call began: it writes a committed backup <prefix>-1 into loc
// and waits until sync creates it in the cluster, then does the same with
// <prefix>-2, which only a later pass (they run one at a time) can find,
// so the pass that found the first had ended. The store keeps both.
func storeSynced(t *testing.T, s *site, loc *store.Location, prefix string) {
	t.Helper()
	for _, name := range []string{prefix + "-1", prefix + "-2"} {
		b := v1alpha1.NewBackup(name)
		b.Status.Phase = v1alpha1.PhaseCompleted
		must(t, loc.PutJSON(context.Background(), store.BackupDir(name)+store.BackupMarker, b))
		waitBackup(t, s, name, 10*time.Second, v1alpha1.PhaseCompleted)
	}
}

// editSchedule patches sc's spec with the merge patch and waits until the
// schedule reconciler has looked at the edited schedule (its Valid
// condition names the new generation) and left it in phase.
func editSchedule(t *testing.T, s *site, sc *v1alpha1.Schedule, patch string, phase v1alpha1.SchedulePhase) {
	t.Helper()
	ctx := context.Background()
	must(t, s.cl.Patch(ctx, sc, client.RawPatch(types.MergePatchType, []byte(patch))))
	eventually(t, 10*time.Second, "edited schedule "+sc.Name+" looked at", func() error {
		must(t, s.cl.Get(ctx, client.ObjectKeyFromObject(sc), sc))
		c := meta.FindStatusCondition(sc.Status.Conditions, "Valid")
		if c == nil || c.ObservedGeneration != sc.Generation || sc.Status.Phase != phase {
			return fmt.Errorf("generation %d, phase %q, Valid condition %+v", sc.Generation, sc.Status.Phase, c)
		}
		return nil
	})
}

// waitEvents waits until the events.k8s.io Events on the kind/name object
// include each of want ("<type> <reason>"), and shows their notes.
func waitEvents(t *testing.T, s *site, kind, name string, want ...string) {
	t.Helper()
	eventually(t, 10*time.Second, "events of "+kind+" "+name, func() error {
		list := &eventsv1.EventList{}
		if err := s.cl.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		have := map[string]bool{}
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name && e.ReportingController == "ferry-server" && e.Note != "" {
				have[e.Type+" "+e.Reason] = true
			}
		}
		for _, w := range want {
			if !have[w] {
				return fmt.Errorf("no %q event (have %v)", w, have)
			}
		}
		return nil
	})
}

// checkCondition checks the Succeeded condition.
func checkCondition(t *testing.T, conds []metav1.Condition, status metav1.ConditionStatus, reason string) {
	t.Helper()
	for _, c := range conds {
		if c.Type == v1alpha1.ConditionSucceeded {
			if c.Status != status || c.Reason != reason || c.Message == "" {
				t.Errorf("condition %+v, want %s %s", c, status, reason)
			}
			return
		}
	}
	t.Errorf("no %s condition in %+v", v1alpha1.ConditionSucceeded, conds)
}

// metric returns the value of the series named exactly series in a
// Prometheus text exposition, or -1.
func metric(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v
			}
		}
	}
	return -1
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// TestServer runs the server out of cluster against two real API servers
// sharing one S3 location: backup and restore through CRs with store sync,
// metrics and probes, schedules and TTL with a fake clock, and bad input
// (a location with a wrong credential or a missing bucket, an invalid
// cron expression, a Restore of a missing backup), after which the server
// still completes backups.
func TestServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	ctx := context.Background()
	cs, err := testenv.StartNamedClusters(ctx, t, "src", "dst")
	if err != nil {
		t.Fatal(err)
	}
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	must(t, s3.CreateBucket(ctx, "ferry"))
	src := setupSite(t, cs[0], s3, s3.URL("ferry"))
	dst := setupSite(t, cs[1], s3, s3.URL("ferry"))
	clock := clocktesting.NewFakeClock(time.Now())
	metrics, probes := freeAddr(t), freeAddr(t)
	src.start(t, servermode.Options{Clock: clock, LeaderElect: true, MetricsAddr: metrics, ProbeAddr: probes})
	dst.start(t, servermode.Options{})

	// The application: a namespace of ConfigMaps in the source.
	must(t, src.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}))
	for i := 0; i < 20; i++ {
		must(t, src.cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}))
	}

	t.Run("backup and restore through CRs", func(t *testing.T) {
		b := v1alpha1.NewBackup("b1")
		b.Namespace = ns
		b.Spec.IncludedNamespaces = []string{"app"}
		must(t, src.cl.Create(ctx, b))
		b = waitBackup(t, src, "b1", 60*time.Second, v1alpha1.PhaseCompleted)
		if b.Status.ResourceCounts["configmaps"] < 20 || b.Status.Progress.ItemsBackedUp != b.Status.Progress.TotalItems || b.Status.Archive == nil || b.Status.CompletionTimestamp == nil {
			t.Fatalf("status %+v", b.Status)
		}
		if b.Labels[v1alpha1.LabelStorageLocation] != "default" {
			t.Errorf("labels %v", b.Labels)
		}
		checkCondition(t, b.Status.Conditions, metav1.ConditionTrue, v1alpha1.ReasonCompleted)
		waitEvents(t, src, "Backup", "b1", "Normal Started", "Normal Completed")
		// Store sync brings it to the target within a sync period (1s).
		synced := waitBackup(t, dst, "b1", 5*time.Second, v1alpha1.PhaseCompleted)
		if synced.Status.Archive == nil || synced.Status.Archive.SHA256 != b.Status.Archive.SHA256 {
			t.Fatalf("synced status %+v", synced.Status)
		}
		r := v1alpha1.NewRestore("r1")
		r.Namespace = ns
		r.Spec.BackupName = "b1"
		must(t, dst.cl.Create(ctx, r))
		r = waitRestore(t, dst, "r1", v1alpha1.PhaseCompleted)
		if r.Status.Counts.Created < 21 || r.Status.Counts.Failed != 0 {
			t.Fatalf("restore counts %+v", r.Status.Counts)
		}
		cm := &corev1.ConfigMap{}
		must(t, dst.cl.Get(ctx, client.ObjectKey{Namespace: "app", Name: "cm-7"}, cm))
		if cm.Data["i"] != "7" || cm.Labels[v1alpha1.LabelRestore] != "r1" {
			t.Errorf("restored ConfigMap %+v", cm)
		}
		// Metrics and probes.
		body, err := httpGet("http://" + metrics + "/metrics")
		must(t, err)
		// At least these (the registry is the process's, shared by -count runs).
		for _, want := range []string{`ferry_backups_total{phase="Completed"}`, "ferry_backup_items_total", "ferry_backup_duration_seconds_count", "ferry_backup_bytes_total", `ferry_storage_location_available{location="default"}`} {
			if v := metric(body, want); v < 1 {
				t.Errorf("/metrics: %s = %v, want >= 1", want, v)
			}
		}
		for _, p := range []string{"/healthz", "/readyz"} {
			if _, err := httpGet("http://" + probes + p); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("store sync deletes a backup gone from the store", func(t *testing.T) {
		loc, err := store.Open(ctx, s3.URL("ferry"), store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}))
		must(t, err)
		defer loc.Close()
		b := v1alpha1.NewBackup("b2")
		b.Namespace = ns
		b.Spec.IncludedNamespaces = []string{"app"}
		must(t, src.cl.Create(ctx, b))
		waitBackup(t, src, "b2", 60*time.Second, v1alpha1.PhaseCompleted)
		waitBackup(t, dst, "b2", 5*time.Second, v1alpha1.PhaseCompleted)
		must(t, loc.DeleteBackup(ctx, "b2"))
		for _, s := range []*site{src, dst} {
			eventually(t, 5*time.Second, "b2 deleted in "+s.c.Name, func() error {
				err := s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b2"}, &v1alpha1.Backup{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("still there (%v)", err)
			})
		}
	})

	t.Run("encrypted backup", func(t *testing.T) {
		id, err := age.GenerateX25519Identity()
		must(t, err)
		b := v1alpha1.NewBackup("enc")
		b.Namespace = ns
		b.Spec.IncludedNamespaces = []string{"app"}
		b.Spec.EncryptionRecipients = []string{id.Recipient().String()}
		must(t, src.cl.Create(ctx, b))
		b = waitBackup(t, src, "enc", 60*time.Second, v1alpha1.PhaseCompleted)
		if b.Status.Archive == nil || b.Status.Archive.Encryption != "age" {
			t.Fatalf("archive %+v", b.Status.Archive)
		}
		waitBackup(t, dst, "enc", 10*time.Second, v1alpha1.PhaseCompleted)
		restoreEnc := func(name string, ref *v1alpha1.SecretKeyReference, phase v1alpha1.Phase) *v1alpha1.Restore {
			r := v1alpha1.NewRestore(name)
			r.Namespace = ns
			r.Spec.BackupName = "enc"
			r.Spec.NamespaceMapping = map[string]string{"app": name}
			r.Spec.EncryptionIdentitySecret = ref
			must(t, dst.cl.Create(ctx, r))
			return waitRestore(t, dst, name, phase)
		}
		// Without an identity, and with a Secret or key that is missing or
		// not an identity: Failed, saying which.
		must(t, dst.cl.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "age"},
			StringData: map[string]string{"identity": "# key\n" + id.String() + "\n", "junk": "not a key"}}))
		for name, c := range map[string]struct {
			ref  *v1alpha1.SecretKeyReference
			want string
		}{
			"enc-none":     {nil, "spec.encryptionIdentitySecret"},
			"enc-nosecret": {&v1alpha1.SecretKeyReference{Name: "nosuch"}, `Secret ferry/nosuch key "identity": secrets "nosuch" not found`},
			"enc-nokey":    {&v1alpha1.SecretKeyReference{Name: "age", Key: "other"}, `Secret ferry/age key "other": the Secret has no such key`},
			"enc-junk":     {&v1alpha1.SecretKeyReference{Name: "age", Key: "junk"}, `key "junk": not an age identity file`},
		} {
			r := restoreEnc(name, c.ref, v1alpha1.PhaseFailed)
			if !strings.Contains(r.Status.FailureReason, c.want) {
				t.Errorf("%s: reason %q, want %q", name, r.Status.FailureReason, c.want)
			}
		}
		r := restoreEnc("enc-ok", &v1alpha1.SecretKeyReference{Name: "age"}, v1alpha1.PhaseCompleted)
		cm := &corev1.ConfigMap{}
		must(t, dst.cl.Get(ctx, client.ObjectKey{Namespace: "enc-ok", Name: "cm-3"}, cm))
		if cm.Data["i"] != "3" || r.Status.Counts.Created < 21 {
			t.Errorf("restored %+v, counts %+v", cm.Data, r.Status.Counts)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		// A URL the CRD's validation refuses.
		bad := &v1alpha1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ftp"}, Spec: v1alpha1.BackupStorageLocationSpec{URL: "ftp://x"}}
		if err := src.cl.Create(ctx, bad); !apierrors.IsInvalid(err) {
			t.Errorf("ftp:// location: %v, want Invalid", err)
		}
		// Names too long for what is built on them are refused by the CRDs.
		long := &v1alpha1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.Repeat("l", 64)}, Spec: v1alpha1.BackupStorageLocationSpec{URL: s3.URL("ferry")}}
		if err := src.cl.Create(ctx, long); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "at most 63 characters") {
			t.Errorf("64-character location name: %v", err)
		}
		longB := v1alpha1.NewBackup(strings.Repeat("b", 182))
		longB.Namespace = ns
		if err := src.cl.Create(ctx, longB); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "at most 181 characters") {
			t.Errorf("182-character backup name: %v", err)
		}
		// A negative TTL, and Velero's habit of naming the location in
		// spec.storageLocation (ferry writes the URL there): InvalidSpec.
		for name, c := range map[string]struct {
			spec v1alpha1.BackupSpec
			want string
		}{
			"negttl":   {v1alpha1.BackupSpec{TTL: &metav1.Duration{Duration: -time.Hour}}, `spec.ttl: Invalid value: "-1h0m0s": negative`},
			"velerobk": {v1alpha1.BackupSpec{StorageLocation: "default"}, "name the BackupStorageLocation in spec.storageLocationName"},
		} {
			b := v1alpha1.NewBackup(name)
			b.Namespace = ns
			b.Spec = c.spec
			must(t, src.cl.Create(ctx, b))
			b = waitBackup(t, src, name, 10*time.Second, v1alpha1.PhaseFailed)
			checkCondition(t, b.Status.Conditions, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec)
			if !strings.Contains(b.Status.FailureReason, c.want) {
				t.Errorf("%s: %q, want %q", name, b.Status.FailureReason, c.want)
			}
		}
		// A wrong credential and a missing bucket.
		must(t, src.cl.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wrong"},
			StringData: map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: "wrong"}}))
		for name, spec := range map[string]v1alpha1.BackupStorageLocationSpec{
			"wrongcred": {URL: s3.URL("ferry"), Credential: &v1alpha1.SecretReference{Name: "wrong"}},
			"nobucket":  {URL: s3.URL("nosuchbucket"), Credential: &v1alpha1.SecretReference{Name: "creds"}},
			"folder":    {URL: strings.Replace(s3.URL("ferry"), "ferry?", "ferry/sub?", 1), Credential: &v1alpha1.SecretReference{Name: "creds"}},
			"nosecret":  {URL: s3.URL("ferry"), Credential: &v1alpha1.SecretReference{Name: "nosuch"}},
		} {
			must(t, src.cl.Create(ctx, &v1alpha1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}))
		}
		for name, want := range map[string]string{"wrongcred": "access denied", "nobucket": "not found", "folder": "names a bucket, not a folder", "nosecret": `secrets "nosuch" not found`} {
			bsl := &v1alpha1.BackupStorageLocation{}
			eventually(t, 10*time.Second, "location "+name, func() error {
				must(t, src.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, bsl))
				if bsl.Status.Phase != v1alpha1.LocationUnavailable {
					return fmt.Errorf("phase %q", bsl.Status.Phase)
				}
				return nil
			})
			if !strings.Contains(bsl.Status.Message, want) || len(bsl.Status.Conditions) != 1 || bsl.Status.Conditions[0].Status != metav1.ConditionFalse {
				t.Errorf("location %s: message %q, conditions %+v; want %q", name, bsl.Status.Message, bsl.Status.Conditions, want)
			}
			b := v1alpha1.NewBackup("to-" + name)
			b.Namespace = ns
			b.Spec.StorageLocationName = name
			start := time.Now()
			must(t, src.cl.Create(ctx, b))
			b = waitBackup(t, src, b.Name, 10*time.Second, v1alpha1.PhaseFailed)
			if !strings.Contains(b.Status.FailureReason, "Unavailable") || !strings.Contains(b.Status.FailureReason, want) {
				t.Errorf("backup to %s: reason %q", name, b.Status.FailureReason)
			}
			checkCondition(t, b.Status.Conditions, metav1.ConditionFalse, v1alpha1.ReasonLocationUnavailable)
			t.Logf("backup to %s failed in %s: %s", name, time.Since(start).Round(time.Millisecond), b.Status.FailureReason)
		}
		// An invalid cron expression.
		sc := &v1alpha1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "badcron"}, Spec: v1alpha1.ScheduleSpec{Schedule: "every tuesday"}}
		must(t, src.cl.Create(ctx, sc))
		eventually(t, 10*time.Second, "schedule badcron", func() error {
			must(t, src.cl.Get(ctx, client.ObjectKeyFromObject(sc), sc))
			if sc.Status.Phase != v1alpha1.SchedulePhaseFailedValidation {
				return fmt.Errorf("phase %q", sc.Status.Phase)
			}
			return nil
		})
		if len(sc.Status.ValidationErrors) != 1 || !strings.Contains(sc.Status.ValidationErrors[0], `spec.schedule: Invalid value: "every tuesday"`) {
			t.Errorf("validation errors %q", sc.Status.ValidationErrors)
		}
		// A Restore of a missing backup.
		r := v1alpha1.NewRestore("r-missing")
		r.Namespace = ns
		r.Spec.BackupName = "nosuch"
		must(t, dst.cl.Create(ctx, r))
		r = waitRestore(t, dst, "r-missing", v1alpha1.PhaseFailed)
		if !strings.Contains(r.Status.FailureReason, `backup "nosuch"`) || !strings.Contains(r.Status.FailureReason, "not found") {
			t.Errorf("restore of a missing backup: %q", r.Status.FailureReason)
		}
		checkCondition(t, r.Status.Conditions, metav1.ConditionFalse, v1alpha1.ReasonBackupNotRestorable)
		waitEvents(t, dst, "Restore", "r-missing", "Warning "+v1alpha1.ReasonBackupNotRestorable)
		waitEvents(t, src, "BackupStorageLocation", "wrongcred", "Warning Unavailable")
		waitEvents(t, src, "Backup", "to-wrongcred", "Warning "+v1alpha1.ReasonLocationUnavailable)
	})

	t.Run("schedule and TTL", func(t *testing.T) {
		sc := &v1alpha1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minutely"}, Spec: v1alpha1.ScheduleSpec{
			Schedule: "* * * * *", Template: v1alpha1.BackupSpec{IncludedNamespaces: []string{"app"}}, TTL: &metav1.Duration{Duration: time.Hour}}}
		must(t, src.cl.Create(ctx, sc))
		eventually(t, 10*time.Second, "schedule enabled", func() error {
			must(t, src.cl.Get(ctx, client.ObjectKeyFromObject(sc), sc))
			if sc.Status.Phase != v1alpha1.SchedulePhaseEnabled || sc.Status.NextBackup == nil {
				return fmt.Errorf("phase %q", sc.Status.Phase)
			}
			return nil
		})
		next := sc.Status.NextBackup.Time
		clock.SetTime(next.Add(time.Second))
		name := schedule.BackupName("minutely", next)
		b := waitBackup(t, src, name, 60*time.Second, v1alpha1.PhaseCompleted)
		if b.Labels[v1alpha1.LabelSchedule] != "minutely" || b.Spec.TTL == nil || b.Status.Expiration == nil || !b.Status.Expiration.Time.Equal(next.Add(time.Second+time.Hour).Truncate(time.Second)) {
			t.Errorf("scheduled backup: labels %v, ttl %v, expiration %v", b.Labels, b.Spec.TTL, b.Status.Expiration)
		}
		waitBackup(t, dst, name, 5*time.Second, v1alpha1.PhaseCompleted)
		// Paused: time passes, nothing is created.
		must(t, src.cl.Patch(ctx, sc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`))))
		eventually(t, 5*time.Second, "schedule paused", func() error {
			must(t, src.cl.Get(ctx, client.ObjectKeyFromObject(sc), sc))
			if sc.Status.Phase != v1alpha1.SchedulePhasePaused {
				return fmt.Errorf("phase %q", sc.Status.Phase)
			}
			return nil
		})
		// The TTL passes: deleted from the store and both clusters.
		clock.SetTime(next.Add(2 * time.Hour))
		for _, s := range []*site{src, dst} {
			eventually(t, 10*time.Second, name+" deleted in "+s.c.Name, func() error {
				err := s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1alpha1.Backup{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("still there (%v)", err)
			})
		}
		loc, err := store.Open(ctx, s3.URL("ferry"), store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}))
		must(t, err)
		defer loc.Close()
		if _, err := loc.GetBackup(ctx, name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expired backup in the store: %v", err)
		}
		// Two hours of runs are due. Once the server has looked at the
		// paused schedule at this time, it has created nothing.
		editSchedule(t, src, sc, `{"spec":{"ttl":"2h"}}`, v1alpha1.SchedulePhasePaused)
		list := &v1alpha1.BackupList{}
		must(t, src.cl.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelSchedule: "minutely"}))
		if len(list.Items) != 0 {
			t.Errorf("paused schedule created %d backups", len(list.Items))
		}
	})

	t.Run("TTL never deletes another backup's data", func(t *testing.T) {
		// The store already has a folder "taken" (another writer's, left
		// Incomplete); a Backup of that name fails, and when its TTL
		// passes only the Backup object goes.
		loc, err := store.Open(ctx, s3.URL("ferry"), store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}))
		must(t, err)
		defer loc.Close()
		other := v1alpha1.NewBackup("taken")
		other.UID = "someone-else"
		must(t, loc.PutJSON(ctx, store.BackupDir("taken")+store.BackupStartedMarker, other))
		b := v1alpha1.NewBackup("taken")
		b.Namespace = ns
		b.Spec.TTL = &metav1.Duration{Duration: time.Minute}
		must(t, src.cl.Create(ctx, b))
		b = waitBackup(t, src, "taken", 10*time.Second, v1alpha1.PhaseFailed)
		if !strings.Contains(b.Status.FailureReason, "already exists") || b.Status.Expiration == nil {
			t.Fatalf("reason %q, expiration %v", b.Status.FailureReason, b.Status.Expiration)
		}
		clock.SetTime(b.Status.Expiration.Add(time.Minute))
		eventually(t, 10*time.Second, "expired Backup deleted", func() error {
			if err := src.cl.Get(ctx, client.ObjectKeyFromObject(b), &v1alpha1.Backup{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		got, err := loc.GetBackup(ctx, "taken")
		if !errors.Is(err, store.ErrIncomplete) || got == nil || got.UID != "someone-else" {
			t.Fatalf("the other backup's folder: %v, %+v", err, got)
		}
		waitEvents(t, src, "Backup", "taken", "Warning StoreFolderKept")
	})
}

// TestRestartMidBackup stops the server while a backup's archive upload is
// held: the Backup stays InProgress in the cluster (nothing is written at
// stop) and Incomplete in the store. The next server marks it Failed with
// the reason, and a new Backup completes.
func TestRestartMidBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	ctx := context.Background()
	c, err := testenv.StartCluster(ctx, t, "restart")
	if err != nil {
		t.Fatal(err)
	}
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	must(t, s3.CreateBucket(ctx, "ferry"))
	proxy, err := testenv.StartHoldProxy(t, s3.Endpoint)
	must(t, err)
	bucketURL := strings.Replace(s3.URL("ferry"), s3.Endpoint, proxy.Endpoint, 1)
	s := setupSite(t, c, s3, bucketURL)
	s.start(t, servermode.Options{LeaderElect: true, LeaseDuration: 3 * time.Second})

	proxy.Hold(".tar.gz")
	b := v1alpha1.NewBackup("killed")
	b.Namespace = ns
	must(t, s.cl.Create(ctx, b))
	select {
	case <-proxy.Arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the archive upload never started")
	}
	waitBackup(t, s, "killed", 5*time.Second, v1alpha1.PhaseInProgress)
	s.stop()
	proxy.Release()
	if got := waitBackup(t, s, "killed", time.Second, v1alpha1.PhaseInProgress); got.Status.CompletionTimestamp != nil {
		t.Fatalf("stopped server finished the backup: %+v", got.Status)
	}

	s.start(t, servermode.Options{LeaderElect: true, LeaseDuration: 3 * time.Second})
	got := waitBackup(t, s, "killed", 30*time.Second, v1alpha1.PhaseFailed)
	if !strings.Contains(got.Status.FailureReason, "stopped before it finished") {
		t.Errorf("reason %q", got.Status.FailureReason)
	}
	checkCondition(t, got.Status.Conditions, metav1.ConditionFalse, v1alpha1.ReasonServerStopped)
	loc, err := store.Open(ctx, s3.URL("ferry"), store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}))
	must(t, err)
	defer loc.Close()
	if _, err := loc.GetBackup(ctx, "killed"); !errors.Is(err, store.ErrIncomplete) {
		t.Errorf("killed backup in the store: %v, want Incomplete", err)
	}
	b2 := v1alpha1.NewBackup("after")
	b2.Namespace = ns
	must(t, s.cl.Create(ctx, b2))
	waitBackup(t, s, "after", 60*time.Second, v1alpha1.PhaseCompleted)
}
