package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// veleroArchive builds a backup in Velero's documented layout: a
// metadata/version file, every object at its preferred version both under
// resources/<gr>/namespaces/... and resources/<gr>/<v>-preferredversion/...,
// and velero-backup.json beside the tar.gz in the store.
func veleroArchive(t *testing.T, storeDir, name, format string, objs map[string]map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	add := func(path string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: path, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(data)
	}
	add("metadata/version", []byte(format))
	for path, o := range objs {
		data, _ := json.Marshal(o)
		add(path, data)
		// The preferred-version copy, as Velero 1.4+ writes it.
		parts := strings.SplitN(path, "/", 3) // resources, gr, rest
		if v, ok := o["apiVersion"].(string); ok {
			ver := v[strings.LastIndex(v, "/")+1:]
			add(parts[0]+"/"+parts[1]+"/"+ver+"-preferredversion/"+parts[2], data)
		}
	}
	_ = tw.Close()
	_ = gz.Close()
	dir := filepath.Join(storeDir, "backups", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".tar.gz"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := map[string]any{"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": map[string]any{"name": name, "namespace": "velero"},
		"spec": map[string]any{"includedNamespaces": []string{"legacy"}}, "status": map[string]any{"phase": "Completed", "formatVersion": format, "version": 1}}
	data, _ := json.Marshal(marker)
	if err := os.WriteFile(filepath.Join(dir, "velero-backup.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVeleroBackup restores a Velero-format backup built from Velero's
// documented layout, and refuses one with an unknown archive version.
func TestVeleroBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	storeDir := strings.TrimPrefix(e.storage, "file://")
	objs := map[string]map[string]any{
		"resources/namespaces/cluster/legacy.json": {"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "legacy", "uid": "11111111-1111-1111-1111-111111111111", "resourceVersion": "42"}},
		"resources/configmaps/namespaces/legacy/app-config.json": {"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "app-config", "namespace": "legacy", "uid": "22222222-2222-2222-2222-222222222222", "resourceVersion": "43", "creationTimestamp": "2024-01-01T00:00:00Z"},
			"data":     map[string]any{"mode": "velero"}},
		"resources/deployments.apps/namespaces/legacy/web.json": {"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "legacy", "uid": "33333333-3333-3333-3333-333333333333"},
			"spec": map[string]any{"replicas": 0, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx:1.25"}}}}},
			"status": map[string]any{"replicas": 0}},
	}
	veleroArchive(t, storeDir, "nightly", "1.1.0", objs)
	r := e.run(t, "restore", "create", "from-velero", "--from-velero-backup", "nightly", "--context", "dst", "-o", "json")
	if r.code != 0 {
		t.Fatalf("restore of a Velero backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	cm, err := dst.CoreV1().ConfigMaps("legacy").Get(ctx, "app-config", metav1.GetOptions{})
	if err != nil || cm.Data["mode"] != "velero" || cm.Labels["ferry.dev/backup"] != "nightly" {
		t.Errorf("ConfigMap from the Velero backup: %v %+v", err, cm)
	}
	if _, err := dst.AppsV1().Deployments("legacy").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("Deployment from the Velero backup: %v", err)
	}
	var rs struct {
		Status struct {
			Counts map[string]int `json:"counts"`
		} `json:"status"`
	}
	mustJSON(t, r.stdout, &rs)
	if rs.Status.Counts["created"] != 3 || rs.Status.Counts["failed"] != 0 {
		t.Errorf("counts %v, want 3 created (each object once, though Velero stores it twice)", rs.Status.Counts)
	}
	veleroArchive(t, storeDir, "future", "9.9.9", objs)
	bad := e.run(t, "restore", "create", "from-future", "--from-velero-backup", "future", "--context", "dst")
	if bad.code != 1 || !strings.Contains(bad.stderr, `"9.9.9"`) || !strings.Contains(bad.stderr, "metadata/version") {
		t.Errorf("unknown Velero format: exit %d stderr %q", bad.code, bad.stderr)
	}
	if nf := e.run(t, "restore", "create", "from-none", "--from-velero-backup", "nosuch", "--context", "dst"); nf.code != 1 || !strings.Contains(nf.stderr, "velero-backup.json") {
		t.Errorf("missing Velero backup: exit %d stderr %q", nf.code, nf.stderr)
	}
}
