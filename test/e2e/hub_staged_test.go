package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/report"
)

// TestHubStaged is TestStagedCutover through the hub, with a real
// database: etcd on a claim and a writer putting a key every 50 ms. A
// Migration with spec.staged runs a stage every 25 seconds while they run; its
// status lists the stages (the later ones move about what changed) and
// the prediction; its spec is fixed but for spec.staged; setting
// spec.staged.cutover cuts over, and the status and the hub's report show
// the downtime beside the prediction. The hub, SIGKILLed in the cutover's
// restore and started again with the target unreachable, retries the
// cutover (the source is quiesced), and once the target answers again
// finishes it from the journal. The
// target's etcd starts from the data and holds every key acknowledged
// before the cutover.
func TestHubStaged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := newVolumeEnv(ctx, t)
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	const ns = "live"
	createEtcdDB(ctx, t, src, ns, e.reg.NodeHost)
	waitAppReady(ctx, t, e.src, ns, "etcd")

	dir := t.TempDir()
	h := &hubProc{dataDir: dir, env: e.env, args: []string{"hub", "--data-dir", dir, "--secure-port", "0", "-v",
		"--repository-password-file", e.password, "--helper-image", e.image, "--migration-lease-duration", "6s"}}
	h.start(t)
	hubKC := filepath.Join(dir, "admin.kubeconfig")
	for _, c := range []*testenv.Cluster{e.src, e.dst} {
		r := ferry(t, nil, "hub", "cluster", "add", c.Name, "--kubeconfig", writeContextKubeconfig(t, c), "--hub", hubKC,
			"--node-pods-dir", filepath.Join(c.Node.RootDir, "pods"))
		if r.code != 0 {
			t.Fatalf("hub cluster add %s: exit %d\n%s", c.Name, r.code, r.stderr)
		}
	}
	hc, _ := h.client(t)
	m := &v1beta1.Migration{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "live"}, Spec: v1beta1.MigrationSpec{
		Source: v1beta1.ClusterReference{Cluster: "src"}, Target: v1beta1.ClusterReference{Cluster: "dst"},
		Storage: v1beta1.MigrationStorage{Location: e.location},
		Backup:  v1beta1.MigrationBackup{IncludedNamespaces: []string{ns}},
		Staged:  &v1beta1.StagedMigration{Interval: metav1.Duration{Duration: 25 * time.Second}}}}
	if err := hc.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m = waitFor(t, hc, m, 8*time.Minute, func(m *v1beta1.Migration) bool {
		return m.Status.StageCount >= 2 && m.Status.Phase == v1beta1.PhaseStaged || terminal(m.Status.Phase)
	})
	st := m.Status
	t.Logf("status after two stages: %+v", st)
	if len(st.Stages) < 2 || st.Prediction == nil || st.Prediction.Total.Duration <= 0 || st.NextStageTime == nil || st.Lease != nil || st.Reason != "" {
		t.Fatalf("hub Migration live after two stages: %+v\nhub log:\n%s", st, h.log.String())
	}
	s1, s2 := st.Stages[0], st.Stages[1]
	// etcd rewrites its WAL segment (64 MB, preallocated) and its
	// database in place: stage 2 copies those, not /data/base.
	if s1.ChangedBytes < 16<<20 || s2.ScannedBytes < s1.ChangedBytes || s2.ChangedBytes > s2.ScannedBytes-16<<20 || s2.CompletionTime == nil || s2.Claims != 1 {
		t.Errorf("stages %+v, %+v: want all of the data first, then what etcd changed, without /data/base", s1, s2)
	}
	if pods, _ := kubernetes.NewForConfigOrDie(e.dst.Config).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=etcd"}); len(pods.Items) != 0 {
		t.Errorf("a stage started the workload in the target: %d pods", len(pods.Items))
	}
	checkStagedSpecFixed(ctx, t, hc, m)

	acked := ackedNumber(t, execOut(ctx, t, e.src, ns, "etcd-0", "cat /data/acked"))
	if err := hc.Patch(ctx, m, crclient.RawPatch(types.MergePatchType, []byte(`{"spec":{"staged":{"cutover":true}}}`))); err != nil {
		t.Fatal(err)
	}
	// SIGKILL the hub in the cutover's restore, with the source quiesced:
	// the hub started again resumes the cutover from the journal.
	m = waitFor(t, hc, m, 5*time.Minute, func(m *v1beta1.Migration) bool {
		return m.Status.Phase == v1beta1.PhaseRestore || terminal(m.Status.Phase)
	})
	if m.Status.Phase != v1beta1.PhaseRestore {
		t.Fatalf("hub Migration live ended before it could be killed in its cutover: %+v\nhub log:\n%s", m.Status, h.log.String())
	}
	// The target becomes unreachable first (its ClusterCredential names a
	// port nothing listens on): the resumed cutover fails with the source
	// quiesced, so it is retried, not ended, and says so.
	setClusterServer(ctx, t, hc, e.dst, "https://127.0.0.1:1")
	h.kill()
	h.start(t)
	hc, cfg := h.client(t)
	m = waitFor(t, hc, m, 3*time.Minute, func(m *v1beta1.Migration) bool {
		return m.Status.Reason == "CutoverRetrying" || terminal(m.Status.Phase)
	})
	if m.Status.Reason != "CutoverRetrying" || !strings.Contains(m.Status.Message, "stay quiesced") || m.Status.NextStageTime == nil {
		t.Fatalf("resumed cutover with the target unreachable: %s %s %q, want CutoverRetrying naming the quiesced source\nhub log:\n%s", m.Status.Phase, m.Status.Reason, m.Status.Message, h.log.String())
	}
	t.Logf("retrying: %s", m.Status.Message)
	setClusterServer(ctx, t, hc, e.dst, "")
	m = waitFor(t, hc, m, 8*time.Minute, func(m *v1beta1.Migration) bool { return terminal(m.Status.Phase) })
	st = m.Status
	t.Logf("status after the cutover: %+v\ncutover %+v", st, st.Cutover)
	if st.Phase != v1beta1.PhaseCompleted || st.Cutover == nil || st.Cutover.Step != "Done" || st.Cutover.Downtime == nil || st.Cutover.Downtime.Duration <= 0 ||
		st.Cutover.Predicted.Duration <= 0 || st.Cutover.Workloads != 1 || st.ReportLocation == "" || st.NextStageTime != nil {
		dumpCluster(ctx, t, e.dst)
		t.Fatalf("hub Migration live: %s %s %q, cutover %+v\nhub log:\n%s", st.Phase, st.Reason, st.Message, st.Cutover, h.log.String())
	}
	waitAppReady(ctx, t, e.dst, ns, "etcd")
	checkEtcdKeys(ctx, t, e.dst, ns, acked)
	checkStagedReport(ctx, t, cfg, m)
	noHelperLeft(ctx, t, e.src)
	noHelperLeft(ctx, t, e.dst)
}

func terminal(p v1beta1.MigrationPhase) bool {
	return p == v1beta1.PhaseCompleted || p == v1beta1.PhasePartiallyFailed || p == v1beta1.PhaseFailed
}

// checkStagedSpecFixed: a staged Migration's spec changes only in
// spec.staged, and spec.staged stays.
func checkStagedSpecFixed(ctx context.Context, t *testing.T, hc crclient.Client, m *v1beta1.Migration) {
	t.Helper()
	for _, c := range []struct{ patch, field string }{
		{`{"spec":{"backup":{"includedNamespaces":["live","other"]}}}`, "spec.backup.includedNamespaces: Forbidden"},
		{`{"spec":{"staged":null}}`, "spec.staged: Forbidden"},
		{`{"spec":{"staged":{"interval":"1s"}}}`, "spec.staged.interval: Invalid value"},
	} {
		err := hc.Patch(ctx, m.DeepCopy(), crclient.RawPatch(types.MergePatchType, []byte(c.patch)))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("patch %s: %v, want Invalid at %s", c.patch, err, c.field)
		}
	}
}

// checkStagedReport: the hub's report of a staged Migration is its
// cutover's, with the stages and the downtime beside the prediction.
func checkStagedReport(ctx context.Context, t *testing.T, cfg *rest.Config, m *v1beta1.Migration) {
	t.Helper()
	rc, err := rest.UnversionedRESTClientFor(withCodec(cfg))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rc.Get().AbsPath(m.Status.ReportLocation).DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %s: %v\n%.300s", m.Status.ReportLocation, err, raw)
	}
	var rep struct{ Cutover *report.Cutover }
	if err := json.Unmarshal(raw, &rep); err != nil || rep.Cutover == nil || len(rep.Cutover.Stages) < 2 || len(rep.Cutover.Steps) != 4 ||
		rep.Cutover.Total.Actual <= 0 || rep.Cutover.Total.Predicted <= 0 {
		t.Errorf("the hub report's cutover section: %+v (%v)", rep.Cutover, err)
	}
}

// setClusterServer writes Cluster c's ClusterCredential anew (written
// whole: the hub lets nobody but its controllers read credentials), with
// server as its API server's address ("": its own).
func setClusterServer(ctx context.Context, t *testing.T, hc crclient.Client, c *testenv.Cluster, server string) {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(writeContextKubeconfig(t, c))
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		if server != "" {
			cl.Server = server
		}
	}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	cred := &v1beta1.ClusterCredential{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: c.Name}, Kubeconfig: data}
	if err := hc.Update(ctx, cred); err != nil {
		t.Fatal(err)
	}
}
