package hub_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/pkg/hub"
)

const ns = "default"

func obj(apiVersion, kind, name string, fields map[string]any) *unstructured.Unstructured {
	o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}
	for k, v := range fields {
		o[k] = v
	}
	return &unstructured.Unstructured{Object: o}
}

func clusterObj(name string) *unstructured.Unstructured {
	return obj("ferry.dev/v1beta1", "Cluster", name, map[string]any{
		"spec": map[string]any{"credentialRef": map[string]any{"name": name}, "context": name}})
}

// migrationV1beta1 is a valid Migration from old to new at v1beta1, with
// backup options changed by backup.
// migrationRestore is a valid Migration with restore as its spec.restore.
// testRecipient is an age public key whose identity no test holds.
const testRecipient = "age1jup9pnf5l76tm58nwts8l4fxkpnrr4d78ldv2c0yd0zpmudnkdqslr0yyz"

func migrationEncryption(name string, enc map[string]any) *unstructured.Unstructured {
	m := migrationV1beta1(name, nil)
	_ = unstructured.SetNestedMap(m.Object, enc, "spec", "encryption")
	return m
}

func migrationRestore(name string, restore map[string]any) *unstructured.Unstructured {
	m := migrationV1beta1(name, nil)
	_ = unstructured.SetNestedMap(m.Object, restore, "spec", "restore")
	return m
}

func migrationStaged(name string, namespaces []any, staged map[string]any) *unstructured.Unstructured {
	var backup map[string]any
	if namespaces != nil {
		backup = map[string]any{"includedNamespaces": namespaces}
	}
	m := migrationV1beta1(name, backup)
	_ = unstructured.SetNestedMap(m.Object, staged, "spec", "staged")
	return m
}

func migrationV1beta1(name string, backup map[string]any) *unstructured.Unstructured {
	return obj("ferry.dev/v1beta1", "Migration", name, map[string]any{"spec": map[string]any{
		"source":  map[string]any{"cluster": "old"},
		"target":  map[string]any{"cluster": "new"},
		"storage": map[string]any{"location": "file:///var/lib/ferry"},
		"backup":  backup,
	}})
}

func create(t *testing.T, c dynamic.Interface, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	gvr := migrationsV1beta1
	switch {
	case o.GetKind() == "Cluster":
		gvr = clustersV1beta1
	case o.GetKind() == "ClusterCredential":
		gvr = credentialsV1beta1
	case o.GetKind() == "Credential":
		gvr = storeCredsV1beta1
	case o.GetAPIVersion() == "ferry.dev/v1alpha1":
		gvr = migrationsV1alpha1
	}
	out, err := c.Resource(gvr).Namespace(ns).Create(context.Background(), o, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return out
}

// TestHub checks one hub as kube-apiserver would answer: discovery,
// OpenAPI, versions and conversion, validation, the status subresource,
// watch, pagination, conflicts, authentication and authorization,
// encryption at rest, /metrics and the handlers hook.
func TestHub(t *testing.T) {
	requireServers(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "more-tokens.csv")
	if err := os.WriteFile(tokens, []byte("viewer-token,vera,vera,\"ferry:viewers\"\nnobody-token,nobody,nobody\n"+teamTokens), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(teamPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	reports := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "report of "+r.URL.Path) })
	h := startHub(t, hub.Options{DataDir: dir, TokenAuthFiles: []string{tokens}, PolicyFile: policy, Handlers: map[string]http.Handler{"/reports/": reports}})
	c := dynamicClient(t, h.admin)
	create(t, c, clusterObj("old"))
	create(t, c, clusterObj("new"))

	t.Run("discovery", func(t *testing.T) { testDiscovery(t, h.admin) })
	t.Run("openapi", func(t *testing.T) { testOpenAPI(t, h.admin) })
	t.Run("versions", func(t *testing.T) { testVersions(t, c) })
	t.Run("invalid", func(t *testing.T) { testInvalid(t, c) })
	t.Run("status", func(t *testing.T) { testStatus(t, c) })
	t.Run("backup kinds", func(t *testing.T) { testBackupKinds(t, c) })
	t.Run("one default location", func(t *testing.T) { testOneDefault(t, c) })
	t.Run("watch", func(t *testing.T) { testWatch(t, c) })
	t.Run("pagination", func(t *testing.T) { testPagination(t, c) })
	t.Run("conflict", func(t *testing.T) { testConflict(t, c) })
	t.Run("auth", func(t *testing.T) { testAuth(t, h, dir) })
	t.Run("teams", func(t *testing.T) { testTeams(t, h) })
	t.Run("encryption", func(t *testing.T) { testEncryption(t, c, h.EtcdServers) })
	t.Run("metrics and handlers", func(t *testing.T) { testNonResource(t, h.admin) })
	t.Run("events", func(t *testing.T) { testEvents(t, h.admin, withToken(h.admin, "viewer-token")) })
}

func testDiscovery(t *testing.T, cfg *rest.Config) {
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := d.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var g *metav1.APIGroup
	for i := range groups.Groups {
		if groups.Groups[i].Name == "ferry.dev" {
			g = &groups.Groups[i]
		}
	}
	if g == nil {
		t.Fatalf("no ferry.dev in %v", groups.Groups)
	}
	var versions []string
	for _, v := range g.Versions {
		versions = append(versions, v.Version)
	}
	if !slices.Equal(versions, []string{"v1beta1", "v1alpha1"}) || g.PreferredVersion.Version != "v1beta1" {
		t.Errorf("ferry.dev versions %v, preferred %s; want [v1beta1 v1alpha1], v1beta1", versions, g.PreferredVersion.Version)
	}
	for _, v := range versions {
		rl, err := d.ServerResourcesForGroupVersion("ferry.dev/" + v)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range rl.APIResources {
			names = append(names, r.Name)
			if r.Name == "backupstoragelocations" && !slices.Equal(r.ShortNames, []string{"bsl"}) {
				t.Errorf("ferry.dev/%s backupstoragelocations: short names %v, want [bsl] (as server mode's CRD)", v, r.ShortNames)
			}
		}
		slices.Sort(names)
		want := []string{"backups", "backups/status", "backupstoragelocations", "backupstoragelocations/status", "clustercredentials", "clusters", "clusters/status",
			"credentials", "migrations", "migrations/report", "migrations/status", "restores", "restores/status", "schedules", "schedules/status"}
		if v == "v1alpha1" {
			// Server mode's kinds are its CRDs' at v1alpha1.
			want = []string{"clustercredentials", "clusters", "clusters/status", "credentials", "migrations", "migrations/report", "migrations/status"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("ferry.dev/%s resources %v, want %v", v, names, want)
		}
	}
}

// get fetches path with the client of cfg and returns the status and body.
func get(t *testing.T, cfg *rest.Config, path string) (int, []byte) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, cfg.Host+path, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func testOpenAPI(t *testing.T, cfg *rest.Config) {
	const model = "com.github.kubeferry.ferry.pkg.hub.apis.ferry.v1beta1.Migration"
	code, b := get(t, cfg, "/openapi/v2")
	var v2 struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(b, &v2); code != 200 || err != nil {
		t.Fatalf("/openapi/v2: %d, %v", code, err)
	}
	if gvk, ok := v2.Definitions[model]["x-kubernetes-group-version-kind"]; !ok {
		t.Errorf("/openapi/v2: %s has no group-version-kind (%d definitions)", model, len(v2.Definitions))
	} else if s, _ := json.Marshal(gvk); !strings.Contains(string(s), `"version":"v1beta1"`) {
		t.Errorf("/openapi/v2: %s's group-version-kind is %s", model, s)
	}
	code, b = get(t, cfg, "/openapi/v3/apis/ferry.dev/v1beta1")
	var v3 struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(b, &v3); code != 200 || err != nil {
		t.Fatalf("/openapi/v3/apis/ferry.dev/v1beta1: %d, %v", code, err)
	}
	if _, ok := v3.Components.Schemas[model]; !ok {
		t.Errorf("/openapi/v3: no schema %s", model)
	}
	if _, ok := v3.Paths["/apis/ferry.dev/v1beta1/namespaces/{namespace}/migrations/{name}/status"]; !ok {
		t.Errorf("/openapi/v3: no migrations/status path")
	}
}

// testVersions creates a Migration at each version and reads it at the
// other: v1alpha1's spec.sourceCluster is v1beta1's spec.source.cluster.
func testVersions(t *testing.T, c dynamic.Interface) {
	ctx := context.Background()
	alpha := obj("ferry.dev/v1alpha1", "Migration", "from-alpha", map[string]any{"spec": map[string]any{
		"sourceCluster": "old", "targetCluster": "new",
		"storage": map[string]any{"location": "s3://bucket"},
	}})
	create(t, c, alpha)
	b, err := c.Resource(migrationsV1beta1).Namespace(ns).Get(ctx, "from-alpha", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src, _, _ := unstructured.NestedString(b.Object, "spec", "source", "cluster")
	dst, _, _ := unstructured.NestedString(b.Object, "spec", "target", "cluster")
	mode, _, _ := unstructured.NestedString(b.Object, "spec", "images", "mode")
	if src != "old" || dst != "new" || mode != "record" {
		t.Errorf("v1alpha1 Migration read at v1beta1: source %q target %q images.mode %q, want old, new, record (defaulted)", src, dst, mode)
	}
	create(t, c, migrationV1beta1("from-beta", nil))
	a, err := c.Resource(migrationsV1alpha1).Namespace(ns).Get(ctx, "from-beta", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src, _, _ = unstructured.NestedString(a.Object, "spec", "sourceCluster")
	dst, _, _ = unstructured.NestedString(a.Object, "spec", "targetCluster")
	if _, found, _ := unstructured.NestedMap(a.Object, "spec", "source"); src != "old" || dst != "new" || found {
		t.Errorf("v1beta1 Migration read at v1alpha1: sourceCluster %q targetCluster %q (spec.source there: %v)", src, dst, found)
	}
	if phase, _, _ := unstructured.NestedString(a.Object, "status", "phase"); phase != "Pending" {
		t.Errorf("a new Migration's phase is %q, want Pending", phase)
	}
}

// testInvalid: refused at create with the field paths kube-apiserver would give.
func testInvalid(t *testing.T, c dynamic.Interface) {
	cases := []struct {
		name string
		m    *unstructured.Unstructured
		want string
	}{
		{"unknown-cluster", obj("ferry.dev/v1beta1", "Migration", "unknown", map[string]any{"spec": map[string]any{
			"source": map[string]any{"cluster": "old"}, "target": map[string]any{"cluster": "nowhere"},
			"storage": map[string]any{"location": "file:///x"}}}), "spec.target.cluster"},
		{"negative-ttl", migrationV1beta1("ttl", map[string]any{"ttl": "-1h"}), "spec.backup.ttl"},
		{"bad-glob", migrationV1beta1("glob", map[string]any{"includedNamespaces": []any{"shop", "team-["}}), "spec.backup.includedNamespaces[1]"},
		{"bad-location", obj("ferry.dev/v1beta1", "Migration", "loc", map[string]any{"spec": map[string]any{
			"source": map[string]any{"cluster": "old"}, "target": map[string]any{"cluster": "new"},
			"storage": map[string]any{"location": "ftp://x"}}}), "spec.storage.location"},
		{"storage-credentials", obj("ferry.dev/v1beta1", "Migration", "creds", map[string]any{"spec": map[string]any{
			"source": map[string]any{"cluster": "old"}, "target": map[string]any{"cluster": "new"},
			"storage": map[string]any{"location": "file:///x", "credentialRef": map[string]any{"name": "Not_A_Name"}}}}), "spec.storage.credentialRef.name"},
		{"bad-recipient", migrationEncryption("rcpt", map[string]any{"recipients": []any{"age1nope"}, "identityRef": map[string]any{"name": "k", "key": "identity"}}), "spec.encryption.recipients[0]"},
		{"recipients-without-identity", migrationEncryption("noid", map[string]any{"recipients": []any{testRecipient}}), "spec.encryption.identityRef"},
		{"identity-bad-key", migrationEncryption("badkey", map[string]any{"identityRef": map[string]any{"name": "k", "key": "a/b"}}), "spec.encryption.identityRef.key"},
		// A DNS subdomain, but too long for the backup's name in the
		// location (pkg/migration.ValidateName, as ferry migrate --name).
		{"name-too-long", migrationV1beta1(strings.Repeat("n", 190), nil), "metadata.name"},
		{"bad-modifiers", migrationRestore("mods", map[string]any{"resourceModifiers": "rules: [\n"}), "spec.restore.resourceModifiers"},
		{"unknown-cloud", migrationRestore("cloud", map[string]any{"toCloud": "mars"}), "spec.restore.toCloud"},
		{"volume-data-policy", migrationRestore("vdp", map[string]any{"existingVolumeDataPolicy": "merge"}), "spec.restore.existingVolumeDataPolicy"},
		{"negative-crd-timeout", migrationRestore("crd", map[string]any{"crdTimeout": "-1m"}), "spec.restore.crdTimeout"},
		// Staged Migrations: what no stage takes, refused at create.
		{"staged-interval", migrationStaged("st1", []any{"shop"}, map[string]any{"interval": "1s"}), "spec.staged.interval"},
		{"staged-no-interval", migrationStaged("st0", []any{"shop"}, map[string]any{"cutover": true}), "spec.staged.interval"},
		{"staged-no-namespaces", migrationStaged("st2", nil, map[string]any{"interval": "1m"}), "spec.backup.includedNamespaces"},
		{"staged-pattern", migrationStaged("st3", []any{"shop-*"}, map[string]any{"interval": "1m"}), "spec.staged"},
		{"staged-max-stages", migrationStaged("st4", []any{"shop"}, map[string]any{"interval": "1m", "maxStages": int64(3)}), "spec.staged.maxDowntime"},
		{"staged-name", migrationStaged(strings.Repeat("s", 175), []any{"shop"}, map[string]any{"interval": "1m"}), "metadata.name"},
	}
	for _, tc := range cases {
		_, err := c.Resource(migrationsV1beta1).Namespace(ns).Create(context.Background(), tc.m, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: got %v, want 422 Invalid", tc.name, err)
			continue
		}
		var fields []string
		for _, cause := range err.(apierrors.APIStatus).Status().Details.Causes {
			fields = append(fields, cause.Field)
		}
		if !slices.Equal(fields, []string{tc.want}) {
			t.Errorf("%s: refused on fields %v, want [%s] (%v)", tc.name, fields, tc.want, err)
		}
	}
}

// testStatus: a status update does not change the spec; a spec update of a
// Migration is refused by field, and a label update does not change the
// status.
func testStatus(t *testing.T, c dynamic.Interface) {
	ctx := context.Background()
	r := c.Resource(migrationsV1beta1).Namespace(ns)
	m := create(t, c, migrationV1beta1("status", nil))
	_ = unstructured.SetNestedField(m.Object, "Backup", "status", "phase")
	_ = unstructured.SetNestedField(m.Object, int64(7), "status", "counts", "backedUp")
	_ = unstructured.SetNestedField(m.Object, "s3://changed", "spec", "storage", "location")
	m.SetLabels(map[string]string{"set-by": "status-update"})
	got, err := r.UpdateStatus(ctx, m, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	loc, _, _ := unstructured.NestedString(got.Object, "spec", "storage", "location")
	phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
	if loc != "file:///var/lib/ferry" || phase != "Backup" || got.GetGeneration() != 1 {
		t.Errorf("after a status update: spec.storage.location %q, status.phase %q, generation %d; want the old location, Backup, 1", loc, phase, got.GetGeneration())
	}
	if len(got.GetLabels()) != 0 {
		t.Errorf("a status update changed the labels: %v", got.GetLabels())
	}
	// A Completed Migration's spec is fixed: an update is refused, naming
	// each field changed.
	_ = unstructured.SetNestedField(got.Object, "Completed", "status", "phase")
	if got, err = r.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	edit := got.DeepCopy()
	_ = unstructured.SetNestedField(edit.Object, false, "spec", "verify")
	_ = unstructured.SetNestedStringSlice(edit.Object, []string{"shop"}, "spec", "backup", "includedNamespaces")
	_, err = r.Update(ctx, edit, metav1.UpdateOptions{})
	if fields := causeFields(err); !apierrors.IsInvalid(err) || !slices.Equal(fields, []string{"spec.backup.includedNamespaces", "spec.verify"}) ||
		!strings.Contains(err.Error(), "a Migration runs once") {
		t.Errorf("an edit of a Completed Migration's spec: %v (fields %v), want 422 naming spec.backup.includedNamespaces and spec.verify", err, fields)
	}
	// Its labels may change, and the status stays.
	got.SetLabels(map[string]string{"team": "a"})
	_ = unstructured.SetNestedField(got.Object, "Failed", "status", "phase")
	if got, err = r.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	phase, _, _ = unstructured.NestedString(got.Object, "status", "phase")
	if phase != "Completed" || got.GetGeneration() != 1 || got.GetLabels()["team"] != "a" {
		t.Errorf("after a label update: status.phase %q, generation %d, labels %v; want Completed, 1, team=a", phase, got.GetGeneration(), got.GetLabels())
	}
}

// causeFields are the fields an Invalid error names.
func causeFields(err error) []string {
	var fields []string
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Details != nil {
		for _, c := range s.Status().Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	return fields
}

func testWatch(t *testing.T, c dynamic.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := c.Resource(clustersV1beta1).Namespace("watch")
	first, err := r.Create(ctx, clusterObj("w0"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"w1", "w2"} {
		if _, err := r.Create(ctx, clusterObj(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := r.Watch(ctx, metav1.ListOptions{ResourceVersion: first.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var seen []string
	for len(seen) < 2 {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added {
				t.Fatalf("watch event %s %v", ev.Type, ev.Object)
			}
			seen = append(seen, ev.Object.(*unstructured.Unstructured).GetName())
		case <-ctx.Done():
			t.Fatalf("watch from resourceVersion %s saw %v, want [w1 w2]", first.GetResourceVersion(), seen)
		}
	}
	if !slices.Equal(seen, []string{"w1", "w2"}) {
		t.Errorf("watch from after w0 saw %v, want [w1 w2]", seen)
	}
}

func testPagination(t *testing.T, c dynamic.Interface) {
	ctx := context.Background()
	r := c.Resource(clustersV1beta1).Namespace("pages")
	var want []string
	for _, n := range []string{"p0", "p1", "p2", "p3", "p4"} {
		if _, err := r.Create(ctx, clusterObj(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, n)
	}
	var got []string
	opts := metav1.ListOptions{Limit: 2}
	pages := 0
	for {
		l, err := r.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(l.Items) > 2 {
			t.Fatalf("page of %d items with limit 2", len(l.Items))
		}
		for _, i := range l.Items {
			got = append(got, i.GetName())
		}
		if l.GetContinue() == "" {
			break
		}
		opts.Continue = l.GetContinue()
	}
	if !slices.Equal(got, want) || pages != 3 {
		t.Errorf("paged list: %v in %d pages, want %v in 3", got, pages, want)
	}
}

func testConflict(t *testing.T, c dynamic.Interface) {
	ctx := context.Background()
	r := c.Resource(clustersV1beta1).Namespace("conflict")
	old, err := r.Create(ctx, clusterObj("c"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := old.DeepCopy()
	_ = unstructured.SetNestedField(fresh.Object, "other", "spec", "context")
	if _, err := r.Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(old.Object, "stale", "spec", "context")
	if _, err := r.Update(ctx, old, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update at a stale resourceVersion: %v, want 409 Conflict", err)
	}
}
