package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

const scApp = `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-sc}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/pv-sc}
  storageClassName: alicloud-disk-ssd
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: eph, namespace: scmap}
spec:
  replicas: 0
  selector: {matchLabels: {app: eph}}
  template:
    metadata: {labels: {app: eph}}
    spec:
      containers: [{name: c, image: busybox}]
      volumes:
      - name: scratch
        ephemeral:
          volumeClaimTemplate:
            spec:
              accessModes: [ReadWriteOnce]
              storageClassName: alicloud-disk-ssd
              resources: {requests: {storage: 1Gi}}
`

// TestStorageClassMapping maps storage classes in the four places a class
// is named: a PVC and a StatefulSet's volumeClaimTemplate (the corpus'
// ksm and cassandra sets, the latter through the beta annotation), a PV,
// and a Deployment's ephemeral volume.
func TestStorageClassMapping(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	base := corpusDir(t)
	f := filepath.Join(t.TempDir(), "sc.yaml")
	_ = os.WriteFile(f, []byte(scApp), 0o644)
	for _, file := range []string{filepath.Join(base, "k8s-examples-cassandra-statefulset", "cassandra-statefulset.yaml"),
		filepath.Join(base, "ksm-test-manifests-all-kinds", "persistentvolumeclaim.yaml"), f} {
		if _, err := testenv.Apply(ctx, e.src.Config, "scmap", file); err != nil {
			t.Fatal(err)
		}
	}
	e.backup(t, "sc", "--include-namespaces", "scmap", "--include-cluster-resources", "true")
	rs, r := e.restore(t, "sc", "sc", "--storage-class-mappings", "fast:premium,slow:standard,alicloud-disk-ssd:cbs-ssd")
	if r.code != 0 || rs.Status.Counts.Failed != 0 {
		t.Fatalf("restore: exit %d %+v\n%s", r.code, rs.Status.Counts, r.stderr)
	}
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	sts, err := dst.AppsV1().StatefulSets("scmap").Get(ctx, "cassandra", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sts.Spec.VolumeClaimTemplates[0].Annotations["volume.beta.kubernetes.io/storage-class"]; got != "premium" {
		t.Errorf("StatefulSet volumeClaimTemplate class %q, want premium", got)
	}
	pvcs, err := dst.CoreV1().PersistentVolumeClaims("scmap").List(ctx, metav1.ListOptions{})
	if err != nil || len(pvcs.Items) == 0 {
		t.Fatalf("no PVCs restored: %v", err)
	}
	for _, p := range pvcs.Items {
		if beta, ok := p.Annotations["volume.beta.kubernetes.io/storage-class"]; ok {
			// Made by the StatefulSet controller from the template's annotation.
			if beta != "premium" {
				t.Errorf("PVC %s beta class %q, want premium", p.Name, beta)
			}
			continue
		}
		if p.Spec.StorageClassName == nil || *p.Spec.StorageClassName != "standard" {
			t.Errorf("PVC %s class %v, want standard", p.Name, p.Spec.StorageClassName)
		}
	}
	pv, err := dst.CoreV1().PersistentVolumes().Get(ctx, "pv-sc", metav1.GetOptions{})
	if err != nil || pv.Spec.StorageClassName != "cbs-ssd" {
		t.Errorf("PV pv-sc: %v class %q, want cbs-ssd", err, pv.Spec.StorageClassName)
	}
	d, err := dst.AppsV1().Deployments("scmap").Get(ctx, "eph", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc := d.Spec.Template.Spec.Volumes[0].Ephemeral.VolumeClaimTemplate.Spec.StorageClassName; sc == nil || *sc != "cbs-ssd" {
		t.Errorf("ephemeral volume class %v, want cbs-ssd", sc)
	}
	// Each change is listed in the item's results.
	found := false
	for _, it := range e.results(t, "sc") {
		if it["name"] == "cassandra" && it["changes"] != nil {
			found = true
		}
	}
	if !found {
		t.Error("the StatefulSet's class change is not listed in its result")
	}
}
