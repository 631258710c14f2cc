package hub_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/hub"
)

// TestKubectl: kubectl (v1.37.2, built from Go modules) works against the
// hub unchanged: api-resources, apply (client-side and --server-side), get
// at both versions, get -w, describe and explain.
func TestKubectl(t *testing.T) {
	requireServers(t)
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t, hub.Options{DataDir: t.TempDir()})
	kubectl := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", h.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	want := func(out string, subs ...string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(out, s) {
				t.Errorf("kubectl output lacks %q:\n%s", s, out)
			}
		}
	}
	want(kubectl("api-resources", "--api-group", "ferry.dev"), "clusters", "clustercredentials", "migrations", "ferry.dev/v1beta1", "Migration")

	dir := t.TempDir()
	manifest := filepath.Join(dir, "objects.yaml")
	objs := `apiVersion: ferry.dev/v1beta1
kind: Cluster
metadata: {name: old}
spec: {credentialRef: {name: old}}
---
apiVersion: ferry.dev/v1beta1
kind: Cluster
metadata: {name: new}
spec: {credentialRef: {name: new}}
---
apiVersion: ferry.dev/v1alpha1
kind: Migration
metadata: {name: shop}
spec:
  sourceCluster: old
  targetCluster: new
  storage: {location: "file:///var/lib/ferry"}
  backup: {includedNamespaces: [shop]}
`
	if err := os.WriteFile(manifest, []byte(objs), 0o600); err != nil {
		t.Fatal(err)
	}
	want(kubectl("apply", "-f", manifest), "cluster.ferry.dev/old created", "migration.ferry.dev/shop created")
	want(kubectl("get", "migrations.v1beta1.ferry.dev", "shop", "-o", "jsonpath={.spec.source.cluster}"), "old")
	want(kubectl("get", "migrations.v1alpha1.ferry.dev", "shop", "-o", "jsonpath={.spec.sourceCluster}"), "old")
	want(kubectl("get", "migrations"), "NAME", "shop")
	want(kubectl("describe", "migration", "shop"), "Name:", "shop", "Source:", "Cluster:", "old")
	want(kubectl("explain", "migrations.spec.source"), "FIELD: source <ClusterReference>", "Source is the cluster backed up", "cluster\t<string> -required-")
	// Every selection field is described (a new user's finding: <no description>).
	out := kubectl("explain", "backups.spec")
	want(out, "IncludedNamespaces are the namespaces selected", "ExcludedResources are resources left out")
	if strings.Contains(out, "<no description>") {
		t.Errorf("kubectl explain backups.spec has fields without a description:\n%s", out)
	}

	// Server-side apply of a label, as another field manager; a change of
	// the spec is refused by field (a Migration runs once).
	ssa := filepath.Join(dir, "ssa.yaml")
	if err := os.WriteFile(ssa, []byte("apiVersion: ferry.dev/v1beta1\nkind: Migration\nmetadata: {name: shop, labels: {team: shop}}\nspec:\n  source: {cluster: old}\n  target: {cluster: new}\n  storage: {location: \"file:///var/lib/ferry\"}\n  backup: {includedNamespaces: [shop]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want(kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "team", "-f", ssa), "serverside-applied")
	want(kubectl("get", "migration", "shop", "-o", "jsonpath={.metadata.labels.team} {.metadata.managedFields[*].manager}"), "shop", "team")
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte("apiVersion: ferry.dev/v1beta1\nkind: Migration\nmetadata: {name: shop}\nspec:\n  source: {cluster: old}\n  target: {cluster: new}\n  storage: {location: \"file:///var/lib/ferry\"}\n  backup: {includedNamespaces: [shop, shop-db]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", h.Kubeconfig, "apply", "--server-side", "--force-conflicts", "--field-manager", "team", "-f", spec).CombinedOutput()
	if err == nil || !strings.Contains(string(refused), "spec.backup.includedNamespaces: Forbidden: field is immutable") {
		t.Errorf("server-side apply of a changed spec: %v\n%s; want refused at spec.backup.includedNamespaces", err, refused)
	}

	// get -w sees a change made while it watches.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", h.Kubeconfig, "get", "migrations", "-w", "-o", "name")
	var watched bytes.Buffer
	w.Stdout, w.Stderr = &watched, &watched
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	kubectl("label", "migration", "shop", "watched=yes")
	kubectl("delete", "migration", "shop")
	time.Sleep(2 * time.Second)
	cancel()
	_ = w.Wait()
	if n := strings.Count(watched.String(), "migration.ferry.dev/shop"); n < 2 {
		t.Errorf("kubectl get -w printed %d events for shop, want the list and the change:\n%s", n, watched.String())
	}
}
