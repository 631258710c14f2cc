package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

const filteredApp = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.test.ferry.dev}
spec:
  group: test.ferry.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: unused.test.ferry.dev}
spec:
  group: test.ferry.dev
  scope: Namespaced
  names: {plural: unused, singular: unused, kind: Unused}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-a}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/pv-a}
  storageClassName: manual
  claimRef: {namespace: team-a, name: data}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-unrelated}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/pv-u}
  storageClassName: other
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: team-a}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  volumeName: pv-a
  resources: {requests: {storage: 1Gi}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gadget-reader}
rules:
- apiGroups: [test.ferry.dev]
  resources: [gadgets]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: unrelated-role}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read-gadgets, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gadget-reader}
subjects:
- {kind: ServiceAccount, name: default, namespace: team-a}
---
apiVersion: test.ferry.dev/v1
kind: Gadget
metadata: {name: g1, namespace: team-a}
spec: {size: 1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: team-b}
data: {k: v}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: team-a-high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: unused-pc}
value: 10
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: team-a}
spec:
  replicas: 0
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      priorityClassName: team-a-high
      containers: [{name: api, image: busybox}]
`

// TestNamespaceFilteredBackup checks --include-cluster-resources=auto on a
// namespace-filtered backup: only the cluster-scoped objects that included
// objects reference go in.
func TestNamespaceFilteredBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	f := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(f, []byte(filteredApp), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Apply(context.Background(), e.src.Config, "team-a", f); err != nil {
		t.Fatal(err)
	}
	b := e.backup(t, "team-a", "--include-namespaces", "team-*", "--exclude-namespaces", "team-b")
	if b.Status.Phase != "Completed" {
		t.Fatalf("backup phase %s", b.Status.Phase)
	}
	if _, res := e.restore(t, "team-a", "team-a"); res.code != 0 {
		t.Fatalf("restore: exit %d: %s %s", res.code, res.stdout, res.stderr)
	}
	ctx := context.Background()
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s should have been restored: %v", what, err)
		}
	}
	mustNot := func(what string, err error) {
		t.Helper()
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s should not be in a team-a backup (err %v)", what, err)
		}
	}
	_, err := dst.CoreV1().PersistentVolumes().Get(ctx, "pv-a", metav1.GetOptions{})
	must("PV pv-a (bound to team-a/data)", err)
	_, err = dst.RbacV1().ClusterRoles().Get(ctx, "gadget-reader", metav1.GetOptions{})
	must("ClusterRole gadget-reader (bound in team-a)", err)
	_, err = dst.CoreV1().PersistentVolumeClaims("team-a").Get(ctx, "data", metav1.GetOptions{})
	must("PVC team-a/data", err)
	_, err = dst.Discovery().ServerResourcesForGroupVersion("test.ferry.dev/v1")
	must("CRD gadgets.test.ferry.dev", err)
	_, err = dst.SchedulingV1().PriorityClasses().Get(ctx, "team-a-high", metav1.GetOptions{})
	must("PriorityClass team-a-high (named by a Deployment in team-a)", err)
	_, err = dst.SchedulingV1().PriorityClasses().Get(ctx, "unused-pc", metav1.GetOptions{})
	mustNot("PriorityClass unused-pc", err)
	_, err = dst.CoreV1().PersistentVolumes().Get(ctx, "pv-unrelated", metav1.GetOptions{})
	mustNot("PV pv-unrelated", err)
	_, err = dst.RbacV1().ClusterRoles().Get(ctx, "unrelated-role", metav1.GetOptions{})
	mustNot("ClusterRole unrelated-role", err)
	_, err = dst.CoreV1().Namespaces().Get(ctx, "team-b", metav1.GetOptions{})
	mustNot("Namespace team-b (excluded)", err)
	_, err = dst.CoreV1().ConfigMaps("team-b").Get(ctx, "other", metav1.GetOptions{})
	mustNot("ConfigMap team-b/other (excluded)", err)
	// The CRD list of the target holds gadgets but not unused.
	res, _ := dst.Discovery().ServerResourcesForGroupVersion("test.ferry.dev/v1")
	if res != nil {
		for _, r := range res.APIResources {
			if r.Name == "unused" {
				t.Error("CRD unused.test.ferry.dev has no custom resource in team-a but was backed up")
			}
		}
	}
}
