package hub_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
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
	// ... but in system:authenticated, as every user, which the policy
	// lets read namespace shared.
	if _, err := dynamicClient(t, withToken(h.admin, "nobody-token")).Resource(migrationsV1beta1).Namespace("shared").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("a user in no group lists namespace shared, which system:authenticated may read: %v", err)
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
	// Nobody but the hub's controllers reads it back, the admin neither.
	if _, err := c.Resource(credentialsV1beta1).Namespace(ns).Get(context.Background(), "old", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the admin gets a ClusterCredential: %v, want 403", err)
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

// teamTokens are the users of testTeams: alice of team-a, bob of team-b.
const teamTokens = "alice-token,alice,alice,\"team-a\"\nbob-token,bob,bob,\"team-b\"\n"

// teamPolicy binds each team to the default policy's editor role in its
// own namespace, lets bob read Migrations in team-a through a Role, and
// lets team-a use the hub's own storage access, and lets every
// authenticated user read namespace shared.
const teamPolicy = `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-a, namespace: team-a}
subjects: [{kind: Group, name: team-a, apiGroup: rbac.authorization.k8s.io}]
roleRef: {kind: ClusterRole, name: "ferry:editor", apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-b, namespace: team-b}
subjects: [{kind: Group, name: team-b, apiGroup: rbac.authorization.k8s.io}]
roleRef: {kind: ClusterRole, name: "ferry:editor", apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-migrations, namespace: team-a}
rules: [{apiGroups: [ferry.dev], resources: [migrations], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob-reads, namespace: team-a}
subjects: [{kind: User, name: bob, apiGroup: rbac.authorization.k8s.io}]
roleRef: {kind: Role, name: read-migrations, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: hub-storage, namespace: team-a}
rules: [{apiGroups: [ferry.dev], resources: [hubstorage], verbs: [use]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-a-hub-storage, namespace: team-a}
subjects: [{kind: Group, name: team-a, apiGroup: rbac.authorization.k8s.io}]
roleRef: {kind: Role, name: hub-storage, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: everyone-reads, namespace: shared}
subjects: [{kind: Group, name: "system:authenticated", apiGroup: rbac.authorization.k8s.io}]
roleRef: {kind: ClusterRole, name: "ferry:viewer", apiGroup: rbac.authorization.k8s.io}
`

// testTeams: with a policy that binds each team to ferry:editor in its
// namespace, alice (team-a) runs Migrations and writes credentials in
// team-a, and may not get, list, watch or create team-b's Migrations, list
// across namespaces, or read any ClusterCredential or Credential, her own
// team's neither; bob's Role lets him get team-a's Migrations, nothing more.
func testTeams(t *testing.T, h *runningHub) {
	ctx := context.Background()
	admin := dynamicClient(t, h.admin)
	for _, team := range []string{"team-a", "team-b"} {
		for _, cl := range []string{"old", "new"} {
			if _, err := admin.Resource(clustersV1beta1).Namespace(team).Create(ctx, clusterObj(cl), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := admin.Resource(migrationsV1beta1).Namespace("team-b").Create(ctx, migrationV1beta1("b-move", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice := dynamicClient(t, withToken(h.admin, "alice-token"))
	if _, err := alice.Resource(migrationsV1beta1).Namespace("team-a").Create(ctx, migrationV1beta1("a-move", nil), metav1.CreateOptions{}); err != nil {
		t.Errorf("alice creates a Migration in team-a: %v", err)
	}
	if _, err := alice.Resource(migrationsV1beta1).Namespace("team-a").Get(ctx, "a-move", metav1.GetOptions{}); err != nil {
		t.Errorf("alice gets her Migration: %v", err)
	}
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://10.0.0.1\"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
	cred := obj("ferry.dev/v1beta1", "ClusterCredential", "old", map[string]any{"kubeconfig": encodeBase64(kc)})
	if _, err := alice.Resource(credentialsV1beta1).Namespace("team-a").Create(ctx, cred, metav1.CreateOptions{}); err != nil {
		t.Errorf("alice creates a ClusterCredential in team-a: %v", err)
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want 403", what, err)
		}
	}
	b := alice.Resource(migrationsV1beta1).Namespace("team-b")
	_, err := b.Get(ctx, "b-move", metav1.GetOptions{})
	forbidden("alice gets team-b's Migration", err)
	_, err = b.List(ctx, metav1.ListOptions{})
	forbidden("alice lists team-b's Migrations", err)
	_, err = b.Watch(ctx, metav1.ListOptions{})
	forbidden("alice watches team-b's Migrations", err)
	_, err = b.Create(ctx, migrationV1beta1("a-in-b", nil), metav1.CreateOptions{})
	forbidden("alice creates a Migration in team-b", err)
	_, err = alice.Resource(migrationsV1beta1).List(ctx, metav1.ListOptions{})
	forbidden("alice lists Migrations in every namespace", err)
	_, err = alice.Resource(credentialsV1beta1).Namespace("team-a").Get(ctx, "old", metav1.GetOptions{})
	forbidden("alice gets her team's ClusterCredential", err)
	_, err = alice.Resource(credentialsV1beta1).Namespace("team-a").List(ctx, metav1.ListOptions{})
	forbidden("alice lists her team's ClusterCredentials", err)
	_, err = alice.Resource(storeCredsV1beta1).Namespace("team-b").List(ctx, metav1.ListOptions{})
	forbidden("alice lists team-b's Credentials", err)
	_, err = alice.Resource(credentialsV1beta1).Namespace("team-a").Patch(ctx, "old", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	forbidden("alice patches (and so reads) her team's ClusterCredential", err)

	// A delete answers with a Status, never the object, whatever its
	// propagation policy (the hub collects no garbage, a reviewer read
	// credentials through an Orphan delete), dry run or not; a
	// credential takes no finalizers.
	rc, err := rest.UnversionedRESTClientFor(withCodecs(withToken(h.admin, "alice-token")))
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{"Orphan", "Foreground"} {
		body, err := rc.Delete().AbsPath("/apis/ferry.dev/v1beta1/namespaces/team-a/clustercredentials/old").
			Body([]byte(`{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"],"propagationPolicy":"` + policy + `"}`)).DoRaw(ctx)
		if err != nil || strings.Contains(string(body), "kubeconfig") || !strings.Contains(string(body), `"kind":"Status"`) {
			t.Errorf("a dry-run %s delete of a ClusterCredential: %v\n%.300s; want a Status without the kubeconfig", policy, err, body)
		}
	}
	fin := obj("ferry.dev/v1beta1", "ClusterCredential", "with-finalizer", map[string]any{"kubeconfig": encodeBase64(kc)})
	fin.SetFinalizers([]string{"example.com/keep"})
	_, err = alice.Resource(credentialsV1beta1).Namespace("team-a").Create(ctx, fin, metav1.CreateOptions{})
	if fields := causeFields(err); !apierrors.IsInvalid(err) || !slices.Equal(fields, []string{"metadata.finalizers"}) {
		t.Errorf("a ClusterCredential with a finalizer: %v, want 422 at metadata.finalizers", err)
	}

	// The report subresource is authorized as the Migration's: alice may
	// not read team-b's, and hers is not there yet (404, not 403).
	report := func(cfg *rest.Config, namespace, name string) error {
		t.Helper()
		rc, err := rest.UnversionedRESTClientFor(withCodecs(cfg))
		if err != nil {
			t.Fatal(err)
		}
		return rc.Get().AbsPath("/apis/ferry.dev/v1beta1/namespaces/" + namespace + "/migrations/" + name + "/report").Do(ctx).Error()
	}
	forbidden("alice gets team-b's Migration report", report(withToken(h.admin, "alice-token"), "team-b", "b-move"))
	if err := report(withToken(h.admin, "alice-token"), "team-a", "a-move"); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "has no verification report") {
		t.Errorf("alice gets her Migration's report before it ran: %v, want 404, no report yet", err)
	}
	forbidden("bob gets a team-a Migration's report (his Role grants migrations, not migrations/report)", report(withToken(h.admin, "bob-token"), "team-a", "a-move"))

	bob := dynamicClient(t, withToken(h.admin, "bob-token"))
	if _, err := bob.Resource(migrationsV1beta1).Namespace("team-a").Get(ctx, "a-move", metav1.GetOptions{}); err != nil {
		t.Errorf("bob gets team-a's Migration through his Role: %v", err)
	}
	_, err = bob.Resource(migrationsV1beta1).Namespace("team-a").List(ctx, metav1.ListOptions{})
	forbidden("bob lists team-a's Migrations (his Role grants get only)", err)
	testHubStorage(t, h, bob)
}

// testHubStorage: team-b (bob) may not write a location that uses the
// hub's own access to object storage, the hub's disk (file://) or its own
// credentials (no credentialRef), in a Migration or a
// BackupStorageLocation; with a Credential of his namespace he may. The
// admin may, and so may team-a (alice ran a file:// Migration above),
// granted "use" of hubstorage by a Role.
func testHubStorage(t *testing.T, h *runningHub, bob dynamic.Interface) {
	ctx := context.Background()
	invalidAt := func(what string, err error, field string) {
		t.Helper()
		if fields := causeFields(err); !apierrors.IsInvalid(err) || !slices.Equal(fields, []string{field}) || !strings.Contains(err.Error(), "hubstorage") {
			t.Errorf("%s: %v, want 422 at %s naming hubstorage", what, err, field)
		}
	}
	_, err := bob.Resource(migrationsV1beta1).Namespace("team-b").Create(ctx, migrationV1beta1("b-disk", nil), metav1.CreateOptions{})
	invalidAt("bob creates a file:// Migration", err, "spec.storage.location")
	m := migrationV1beta1("b-hub-creds", nil)
	_ = unstructured.SetNestedField(m.Object, "s3://team-a-bucket?region=x", "spec", "storage", "location")
	_, err = bob.Resource(migrationsV1beta1).Namespace("team-b").Create(ctx, m, metav1.CreateOptions{})
	invalidAt("bob creates an s3:// Migration without a credentialRef", err, "spec.storage.credentialRef")
	_ = unstructured.SetNestedField(m.Object, map[string]any{"name": "team-b-keys"}, "spec", "storage", "credentialRef")
	if _, err := bob.Resource(migrationsV1beta1).Namespace("team-b").Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Errorf("bob creates an s3:// Migration with a Credential: %v", err)
	}
	bsl := func(name string, spec map[string]any) *unstructured.Unstructured {
		return obj("ferry.dev/v1beta1", "BackupStorageLocation", name, map[string]any{"spec": spec})
	}
	locations := bob.Resource(migrationsV1beta1.GroupVersion().WithResource("backupstoragelocations")).Namespace("team-b")
	_, err = locations.Create(ctx, bsl("disk", map[string]any{"url": "file:///var/lib/ferry-hub"}), metav1.CreateOptions{})
	invalidAt("bob creates a file:// location", err, "spec.url")
	_, err = locations.Create(ctx, bsl("hub-creds", map[string]any{"url": "s3://team-a-bucket?region=x"}), metav1.CreateOptions{})
	invalidAt("bob creates an s3:// location without a credentialRef", err, "spec.credentialRef")
	own, err := locations.Create(ctx, bsl("own", map[string]any{"url": "s3://team-b-bucket?region=x", "credentialRef": map[string]any{"name": "team-b-keys"}}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("bob creates an s3:// location with a Credential: %v", err)
	}
	unstructured.RemoveNestedField(own.Object, "spec", "credentialRef")
	_, err = locations.Update(ctx, own, metav1.UpdateOptions{})
	invalidAt("bob drops his location's credentialRef", err, "spec.credentialRef")
	admin := dynamicClient(t, h.admin)
	if _, err := admin.Resource(migrationsV1beta1.GroupVersion().WithResource("backupstoragelocations")).Namespace("team-b").
		Create(ctx, bsl("disk", map[string]any{"url": "file:///var/lib/ferry-hub"}), metav1.CreateOptions{}); err != nil {
		t.Errorf("the admin creates a file:// location in team-b: %v", err)
	}
}

// withCodecs is cfg with the codecs a REST client of raw paths needs.
func withCodecs(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}
