package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/hub"
)

// TestExternalEtcd: with EtcdServers the hub keeps its objects in that etcd,
// under /ferry-hub/, and serves them at both versions.
func TestExternalEtcd(t *testing.T) {
	requireServers(t)
	url, err := testenv.StartEtcd(t)
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t, hub.Options{DataDir: t.TempDir(), EtcdServers: []string{url}})
	c := dynamicClient(t, h.admin)
	create(t, c, clusterObj("old"))
	create(t, c, clusterObj("new"))
	create(t, c, migrationV1beta1("ext", nil))
	ctx := context.Background()
	a, err := c.Resource(migrationsV1alpha1).Namespace(ns).Get(ctx, "ext", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if src, _, _ := unstructured.NestedString(a.Object, "spec", "sourceCluster"); src != "old" {
		t.Errorf("v1alpha1 spec.sourceCluster %q, want old", src)
	}
	if _, err := c.Resource(migrationsV1beta1).Namespace(ns).Get(ctx, "ext", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := c.Resource(clustersV1beta1).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 2 {
		t.Fatalf("list clusters: %v, %v; want 2", l, err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/ferry-hub/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	found := false
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
		found = found || strings.HasSuffix(string(kv.Key), "/migrations/default/ext")
	}
	if !found {
		t.Errorf("no Migration default/ext under /ferry-hub/ in the external etcd; keys %v", keys)
	}
}

// TestOneDefaultAcrossHubs: two hubs on one etcd, each given half of 8
// concurrent creates of a default location in one namespace: exactly one
// is accepted (the check and the write are one step across processes, an
// etcd lock per namespace, not only within one).
func TestOneDefaultAcrossHubs(t *testing.T) {
	requireServers(t)
	url, err := testenv.StartEtcd(t)
	if err != nil {
		t.Fatal(err)
	}
	a := startHub(t, hub.Options{DataDir: t.TempDir(), EtcdServers: []string{url}})
	b := startHub(t, hub.Options{DataDir: t.TempDir(), EtcdServers: []string{url}})
	testOneDefault(t, dynamicClient(t, a.admin), dynamicClient(t, b.admin))
}
