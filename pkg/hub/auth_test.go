package hub_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubeferry/ferry/pkg/hub"
)

// withToken is cfg with token instead of its credentials ("": none).
func withToken(cfg *rest.Config, token string) *rest.Config {
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = token
	return c
}

func listErr(t *testing.T, cfg *rest.Config) error {
	t.Helper()
	_, err := dynamicClient(t, cfg).Resource(migrationsV1beta1).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	return err
}

func createErr(t *testing.T, cfg *rest.Config, name string) error {
	t.Helper()
	_, err := dynamicClient(t, cfg).Resource(clustersV1beta1).Namespace("auth").Create(context.Background(), clusterObj(name), metav1.CreateOptions{})
	return err
}

// testAuth: tokens and client certificates of the hub's CA authenticate;
// the authorizer lets admins do everything, viewers read (not
// credentials), and nobody else anything.
func testAuth(t *testing.T, h *runningHub, dir string) {
	if err := listErr(t, withToken(h.admin, "")); !apierrors.IsUnauthorized(err) {
		t.Errorf("no token: %v, want 401", err)
	}
	if err := listErr(t, withToken(h.admin, "wrong")); !apierrors.IsUnauthorized(err) {
		t.Errorf("a wrong token: %v, want 401", err)
	}
	if err := listErr(t, withToken(h.admin, "nobody-token")); !apierrors.IsForbidden(err) {
		t.Errorf("a user in no group: %v, want 403", err)
	}
	viewer := withToken(h.admin, "viewer-token")
	if err := listErr(t, viewer); err != nil {
		t.Errorf("a viewer lists: %v", err)
	}
	if err := createErr(t, viewer, "by-viewer"); !apierrors.IsForbidden(err) {
		t.Errorf("a viewer creates: %v, want 403", err)
	}
	_, err := dynamicClient(t, viewer).Resource(credentialsV1beta1).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("a viewer lists clustercredentials: %v, want 403", err)
	}
	_, err = dynamicClient(t, viewer).Resource(storeCredsV1beta1).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("a viewer lists credentials: %v, want 403", err)
	}
	if err := createErr(t, h.admin, "by-admin"); err != nil {
		t.Errorf("the admin creates: %v", err)
	}
	ca, err := hub.LoadCA(hub.CAFiles(dir))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClientCert("alice", []string{hub.GroupAdmins})
	if err != nil {
		t.Fatal(err)
	}
	cert := rest.AnonymousClientConfig(h.admin)
	cert.CertData, cert.KeyData = certPEM, keyPEM
	if err := createErr(t, cert, "by-cert"); err != nil {
		t.Errorf("a ferry:admins client certificate creates: %v", err)
	}
	// A certificate of another CA is not the hub's.
	stranger, err := hub.LoadOrCreateCA(hub.CAFiles(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err = stranger.IssueClientCert("mallory", []string{hub.GroupMasters})
	if err != nil {
		t.Fatal(err)
	}
	cert.CertData, cert.KeyData = certPEM, keyPEM
	if err := listErr(t, cert); !apierrors.IsUnauthorized(err) {
		t.Errorf("a client certificate of another CA: %v, want 401", err)
	}
}

func encodeBase64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// testEncryption: a ClusterCredential's kubeconfig is not in etcd in plain
// text; a Migration is stored at v1beta1.
func testEncryption(t *testing.T, c *dynamic.DynamicClient, etcdServers []string) {
	const marker = "super-secret-token-4711"
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1"}}]
users: [{name: u, user: {token: ` + marker + `}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	cred := obj("ferry.dev/v1beta1", "ClusterCredential", "old", map[string]any{"kubeconfig": encodeBase64(kubeconfig)})
	create(t, c, cred)
	const storeMarker = "AGE-SECRET-KEY-1TESTMARKER"
	for name, data := range map[string]map[string]any{"empty": nil, "bad-key": {"a/b": encodeBase64("x")}} {
		_, err := c.Resource(storeCredsV1beta1).Namespace(ns).Create(context.Background(), obj("ferry.dev/v1beta1", "Credential", name, map[string]any{"data": data}), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "data") {
			t.Errorf("Credential %s: %v, want 422 naming data", name, err)
		}
	}
	create(t, c, obj("ferry.dev/v1beta1", "Credential", "store", map[string]any{"data": map[string]any{"identity": encodeBase64(storeMarker)}}))
	got, err := c.Resource(credentialsV1beta1).Namespace(ns).Get(context.Background(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(got.Object, "kubeconfig"); s != encodeBase64(kubeconfig) {
		t.Errorf("the ClusterCredential read back differs")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdServers, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/ferry-hub/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var sawCred, sawStoreCred, sawMigration bool
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		switch {
		case strings.Contains(key, "/clustercredentials/default/old"):
			sawCred = true
			if bytes.Contains(kv.Value, []byte(marker)) || bytes.Contains(kv.Value, []byte(encodeBase64(kubeconfig))) {
				t.Errorf("etcd key %s holds the kubeconfig in plain text", key)
			}
			if !bytes.HasPrefix(kv.Value, []byte("k8s:enc:secretbox:v1:key1:")) {
				t.Errorf("etcd key %s is not secretbox-encrypted: %.40q", key, kv.Value)
			}
		case strings.Contains(key, "/credentials/default/store"):
			sawStoreCred = true
			if bytes.Contains(kv.Value, []byte(storeMarker)) || !bytes.HasPrefix(kv.Value, []byte("k8s:enc:secretbox:v1:key1:")) {
				t.Errorf("etcd key %s is not secretbox-encrypted: %.40q", key, kv.Value)
			}
		case strings.Contains(key, "/migrations/default/from-alpha"):
			sawMigration = true
			if !bytes.Contains(kv.Value, []byte(`"apiVersion":"ferry.dev/v1beta1"`)) {
				t.Errorf("etcd key %s is not stored at v1beta1: %.80s", key, kv.Value)
			}
		}
	}
	if !sawCred || !sawStoreCred || !sawMigration {
		t.Errorf("etcd has no ClusterCredential (%v), Credential (%v) or Migration (%v) key among %d", sawCred, sawStoreCred, sawMigration, len(resp.Kvs))
	}
}

// testNonResource: /metrics for admins and viewers, the handlers hook,
// both behind authentication.
func testNonResource(t *testing.T, admin *rest.Config) {
	code, body := get(t, admin, "/metrics")
	if code != http.StatusOK || !bytes.Contains(body, []byte("apiserver_request_total")) {
		t.Errorf("/metrics: %d, %.200s", code, body)
	}
	if code, _ := get(t, withToken(admin, "viewer-token"), "/metrics"); code != http.StatusOK {
		t.Errorf("/metrics as a viewer: %d", code)
	}
	if code, body := get(t, admin, "/reports/default/m1"); code != http.StatusOK || string(body) != "report of /reports/default/m1" {
		t.Errorf("/reports/default/m1: %d %q", code, body)
	}
	if code, _ := get(t, withToken(admin, ""), "/reports/default/m1"); code != http.StatusUnauthorized {
		t.Errorf("/reports without a token: %d, want 401", code)
	}
	if code, _ := get(t, withToken(admin, "nobody-token"), "/metrics"); code != http.StatusForbidden {
		t.Errorf("/metrics as a user in no group: %d, want 403", code)
	}
	// Discovery, as kube-apiserver's system:discovery: any authenticated
	// user learns what is served, and is refused on the resource itself.
	for _, p := range []string{"/apis", "/apis/ferry.dev/v1beta1", "/openapi/v3", "/version"} {
		if code, _ := get(t, withToken(admin, "nobody-token"), p); code != http.StatusOK {
			t.Errorf("%s as a user in no group: %d, want 200", p, code)
		}
	}
}
