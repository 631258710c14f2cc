package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/hub"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/hub/controller"
)

// TestMigrationLeases runs the hub's Migration controller on Migrations
// another hub process left behind, with a cluster nothing answers for:
//   - one in step Restore whose holder's lease expired ends Failed,
//     HubInterrupted, naming the step and the holder;
//   - one whose holder's lease is live is left alone;
//   - one in a step with no lease at all ends the same way;
//   - one left Pending (nothing written yet) is taken over and run, and
//     fails as its target is unreachable, naming spec.target.cluster.
func TestMigrationLeases(t *testing.T) {
	requireServers(t)
	// The first hub, without controllers, is where they were left.
	dir := t.TempDir()
	first := startHub(t, hub.Options{DataDir: dir})
	c, err := crclient.New(first.admin, crclient.Options{Scheme: controller.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Port 1 on loopback: nothing listens there.
	kubeconfig := []byte("apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: x, user: x}}]\nclusters: [{name: x, cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}}]\nusers: [{name: x, user: {token: t}}]\n")
	for _, name := range []string{"old", "new"} {
		meta := metav1.ObjectMeta{Namespace: ns, Name: name}
		if err := c.Create(ctx, &v1beta1.ClusterCredential{ObjectMeta: meta, Kubeconfig: kubeconfig}); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, &v1beta1.Cluster{ObjectMeta: meta, Spec: v1beta1.ClusterSpec{CredentialRef: v1beta1.LocalObjectReference{Name: name}}}); err != nil {
			t.Fatal(err)
		}
	}
	old := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	leftBehind(t, c, "interrupted", v1beta1.PhaseRestore, &v1beta1.Lease{HolderIdentity: "gone-hub", LeaseDurationSeconds: 3, RenewTime: old})
	leftBehind(t, c, "held", v1beta1.PhaseBackup, &v1beta1.Lease{HolderIdentity: "live-hub", LeaseDurationSeconds: 3600, RenewTime: metav1.NowMicro()})
	leftBehind(t, c, "pending", v1beta1.PhasePending, &v1beta1.Lease{HolderIdentity: "gone-hub", LeaseDurationSeconds: 3, RenewTime: old})
	leftBehind(t, c, "no-lease", v1beta1.PhaseVerify, nil)
	first.stop()

	h := startHub(t, hub.Options{DataDir: dir, Controllers: &controller.Options{LeaseDuration: 3 * time.Second, ConnectTimeout: 3 * time.Second}})
	if c, err = crclient.New(h.admin, crclient.Options{Scheme: controller.Scheme()}); err != nil {
		t.Fatal(err)
	}

	m := waitEnded(t, c, "interrupted")
	if m.Status.Phase != v1beta1.PhaseFailed || m.Status.Reason != "HubInterrupted" ||
		!strings.Contains(m.Status.Message, "gone-hub stopped during step Restore") || m.Status.Lease != nil {
		t.Errorf("interrupted: status %+v, want Failed, HubInterrupted, naming the holder and step, lease released", m.Status)
	}
	m = waitEnded(t, c, "no-lease")
	if m.Status.Phase != v1beta1.PhaseFailed || m.Status.Reason != "HubInterrupted" || !strings.Contains(m.Status.Message, "a hub process stopped during step Verify") {
		t.Errorf("no-lease: status %+v, want Failed, HubInterrupted, naming the step", m.Status)
	}
	m = waitEnded(t, c, "pending")
	if m.Status.Phase != v1beta1.PhaseFailed || m.Status.Reason != "TargetUnreachable" && m.Status.Reason != "SourceUnreachable" ||
		!strings.Contains(m.Status.Message, "127.0.0.1:1") {
		t.Errorf("pending: status %+v, want Failed for the unreachable cluster", m.Status)
	}
	var held v1beta1.Migration
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "held"}, &held); err != nil {
		t.Fatal(err)
	}
	if held.Status.Phase != v1beta1.PhaseBackup || held.Status.Lease == nil || held.Status.Lease.HolderIdentity != "live-hub" {
		t.Errorf("held: status %+v, want untouched (Backup, live-hub's lease)", held.Status)
	}
}

// leftBehind creates Migration name with the status a hub process left.
func leftBehind(t *testing.T, c crclient.Client, name string, phase v1beta1.MigrationPhase, lease *v1beta1.Lease) {
	t.Helper()
	ctx := context.Background()
	m := &v1beta1.Migration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1beta1.MigrationSpec{
		Source: v1beta1.ClusterReference{Cluster: "old"}, Target: v1beta1.ClusterReference{Cluster: "new"},
		Storage: v1beta1.MigrationStorage{Location: "file://" + t.TempDir()},
	}}
	// The create strategy clears the status: it is written after.
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Status.Phase, m.Status.Lease = phase, lease
	if err := c.Status().Update(ctx, m); err != nil {
		t.Fatalf("status of %s: %v", name, err)
	}
}

func waitEnded(t *testing.T, c crclient.Client, name string) *v1beta1.Migration {
	t.Helper()
	var m v1beta1.Migration
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &m); err != nil {
			return false, err
		}
		return m.Status.Phase == v1beta1.PhaseFailed || m.Status.Phase == v1beta1.PhaseCompleted || m.Status.Phase == v1beta1.PhasePartiallyFailed, nil
	})
	if err != nil {
		t.Fatalf("%s did not end: %v; status %+v", name, err, m.Status)
	}
	return &m
}
