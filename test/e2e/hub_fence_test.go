package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// TestHubLeaseFence: two hubs on one etcd; hub A reaches it through a
// proxy. A runs a Migration; its source then stops answering (A's run
// waits on it) and A's etcd requests stall, so A can renew its lease no
// more. A stops its run within the renew deadline, before hub B, which
// judges the lease by when it saw it change, ends the Migration Failed
// (HubInterrupted, naming A). Once A's etcd answers again A writes
// nothing more, the object never shows A's lease after B ended it, and
// nothing of the Migration reaches the target.
func TestHubLeaseFence(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	e := newEnv(t)
	ctx := context.Background()
	etcd, err := testenv.StartEtcd(t)
	if err != nil {
		t.Fatal(err)
	}
	etcdProxy, err := testenv.StartStallProxy(t, strings.TrimPrefix(etcd, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	dirA := t.TempDir()
	a := startHub(t, dirA, "--etcd-servers", "http://"+etcdProxy.Addr)
	c, _ := a.client(t)
	srcProxy, src := stallableKubeconfig(t, e.src)
	addCluster(t, c, "src", src)
	addCluster(t, c, "dst", writeContextKubeconfig(t, e.dst))
	srcClient := kubernetes.NewForConfigOrDie(e.src.Config)
	if _, err := srcClient.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fenced"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := srcClient.CoreV1().ConfigMaps("fenced").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := newMigration("fenced", e.storage, "fenced")
	_, got := watchPhases(t, c, m, time.Minute, func(m *v1beta1.Migration) bool { return m.Status.Phase == v1beta1.PhaseBackup })
	if got.Status.Phase != v1beta1.PhaseBackup || got.Status.Lease == nil {
		t.Fatalf("status %+v, want hub A in step Backup", got.Status)
	}
	holderA := got.Status.Lease.HolderIdentity
	// A's run now waits on its source (up to its 1m request timeout).
	srcProxy.Stall()

	// Hub B, on the etcd itself, with A's encryption key.
	dirB := t.TempDir()
	key, err := os.ReadFile(filepath.Join(dirA, "encryption.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, "encryption.yaml"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startHub(t, dirB, "--etcd-servers", etcd)
	cb, _ := b.client(t)
	holders := watchHolders(t, cb, "fenced")
	time.Sleep(2 * time.Second) // B sees A renew.
	etcdProxy.Stall()
	stalled := time.Now()
	ended := waitPhase(t, cb, "fenced", time.Minute)
	endedAt := time.Now()
	if ended.Status.Phase != v1beta1.PhaseFailed || ended.Status.Reason != "HubInterrupted" || !strings.Contains(ended.Status.Message, holderA+" stopped during step Backup") {
		t.Fatalf("status %+v, want Failed, HubInterrupted, naming hub A (%s) and step Backup", ended.Status, holderA)
	}
	etcdProxy.Resume()
	srcProxy.Resume()
	time.Sleep(5 * time.Second)
	var after v1beta1.Migration
	if err := cb.Get(ctx, crclient.ObjectKeyFromObject(m), &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != ended.ResourceVersion {
		t.Errorf("the Migration changed after hub B ended it: %+v", after.Status)
	}
	a.stop()
	stoppedAt := leaseStopTime(t, a.log.String())
	t.Logf("etcd stalled at %s; A stopped its run %s later, B ended the Migration %s later",
		stalled.Format(time.StampMilli), stoppedAt.Sub(stalled).Round(time.Millisecond), endedAt.Sub(stalled).Round(time.Millisecond))
	if !stoppedAt.Before(endedAt) {
		t.Errorf("hub A stopped its run at %s, after hub B ended the Migration at %s", stoppedAt.Format(time.StampMilli), endedAt.Format(time.StampMilli))
	}
	if seen := holders(); strings.Contains(seen, "ended "+holderA) || strings.Count(seen, "ended") != 1 {
		t.Errorf("lease holders seen by B, in order: %s; want A's, then the end, and nothing after", seen)
	}
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	if _, err := dst.CoreV1().ConfigMaps("fenced").Get(ctx, "data", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the target holds ConfigMap fenced/data (%v): hub A's run went on", err)
	}
}

// stallableKubeconfig is a kubeconfig of cluster c through a StallProxy.
func stallableKubeconfig(t *testing.T, c *testenv.Cluster) (*testenv.StallProxy, string) {
	t.Helper()
	p := writeContextKubeconfig(t, c)
	kc, err := clientcmd.LoadFromFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var proxy *testenv.StallProxy
	for _, cl := range kc.Clusters {
		host := strings.TrimPrefix(cl.Server, "https://")
		if proxy, err = testenv.StartStallProxy(t, host); err != nil {
			t.Fatal(err)
		}
		cl.Server, cl.TLSServerName = "https://"+proxy.Addr, strings.Split(host, ":")[0]
	}
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return proxy, p
}

// watchHolders watches Migration name and returns a function that tells
// the lease holders seen, in order ("ended" for the end).
func watchHolders(t *testing.T, c crclient.WithWatch, name string) func() string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := c.Watch(ctx, &v1beta1.MigrationList{}, crclient.InNamespace("default"), crclient.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 1000)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				continue
			}
			m := ev.Object.(*v1beta1.Migration)
			switch {
			case terminalPhase(m.Status.Phase):
				seen <- "ended"
			case m.Status.Lease != nil:
				seen <- m.Status.Lease.HolderIdentity
			}
		}
	}()
	var all []string
	return func() string {
		for {
			select {
			case s := <-seen:
				if len(all) == 0 || all[len(all)-1] != s {
					all = append(all, s)
				}
			default:
				return strings.Join(all, " ")
			}
		}
	}
}

// waitPhase waits until Migration name has ended.
func waitPhase(t *testing.T, c crclient.Client, name string, timeout time.Duration) *v1beta1.Migration {
	t.Helper()
	var m v1beta1.Migration
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := c.Get(context.Background(), crclient.ObjectKey{Namespace: "default", Name: name}, &m); err == nil && terminalPhase(m.Status.Phase) {
			return &m
		}
	}
	t.Fatalf("Migration %s did not end within %s: %+v", name, timeout, m.Status)
	return nil
}

// leaseStopTime is when the hub's log says a run stopped for a lease not
// renewed in time.
func leaseStopTime(t *testing.T, log string) time.Time {
	t.Helper()
	re := regexp.MustCompile(`time=(\S+) level=WARN msg="lease not renewed within its renew deadline: stopping"`)
	match := re.FindStringSubmatch(log)
	if match == nil {
		t.Fatalf("hub A's log says nothing of a lease not renewed in time:\n%s", log)
	}
	at, err := time.Parse(time.RFC3339Nano, match[1])
	if err != nil {
		t.Fatal(err)
	}
	return at
}
