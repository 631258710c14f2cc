package backup

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

// startSource starts a real API server and returns ferry's clients for it
// and an in-memory location.
func startSource(t *testing.T) (*kube.Cluster, *store.Location) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	c, err := testenv.StartCluster(ctx, t, "src")
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := kube.Connect(ctx, "src", c.Config)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close() })
	return cluster, loc
}

// created fails t when a create failed: created(t)(client.Create(...)).
func created(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackupSmallFaults: faults a new user found in the selection of a
// backup (issue 16).
func TestBackupSmallFaults(t *testing.T) {
	cluster, loc := startSource(t)
	ctx := context.Background()
	cs := cluster.Typed
	created(t)(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}))
	created(t)(cs.CoreV1().ConfigMaps("a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}))
	created(t)(cs.CoreV1().Events("a").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "cm.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "a", Name: "cm"},
		Reason:         "Test", Message: "an event", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "ferry-test"},
	}, metav1.CreateOptions{}))
	// kube-controller-manager publishes kube-root-ca.crt into a new
	// namespace a moment later: the counts below include it.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps("a").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("kube-root-ca.crt never appeared in namespace a: %v", err)
	}

	// --include-namespaces a,a: the namespace is backed up once, not
	// refused with "archive entry ... written twice".
	t.Run("namespace named twice", func(t *testing.T) {
		b, _, err := Run(ctx, cluster, loc, Options{Name: "twice", Spec: v1alpha1.BackupSpec{IncludedNamespaces: []string{"a", "a"}}})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.Phase != v1alpha1.PhaseCompleted {
			t.Fatalf("phase %s: %s", b.Status.Phase, b.Status.FailureReason)
		}
		if n := b.Status.ResourceCounts["configmaps"]; n != 2 { // cm and kube-root-ca.crt
			t.Errorf("%d ConfigMaps backed up, want 2 (each once)", n)
		}
		if n := b.Status.ResourceCounts["namespaces"]; n != 1 {
			t.Errorf("%d Namespaces backed up, want 1", n)
		}
	})

	// A backup whose folder is deleted while it runs (ferry backup delete
	// of what looked like an interrupted backup) is not committed: it
	// would look complete with parts missing (a new user's finding).
	t.Run("folder deleted while it ran", func(t *testing.T) {
		opts := Options{Name: "deleted", Spec: v1alpha1.BackupSpec{IncludedNamespaces: []string{"a"}},
			OnStage: func(string) {
				if err := loc.DeleteBackup(ctx, "deleted"); err != nil {
					t.Errorf("deleting the folder: %v", err)
				}
			}}
		b, _, err := Run(ctx, cluster, loc, opts)
		if err == nil || !strings.Contains(err.Error(), "was deleted while it ran") || b.Status.Phase != v1alpha1.PhaseFailed {
			t.Fatalf("Run: %v, phase %s; want it refused, Failed", err, b.Status.Phase)
		}
		if got, err := loc.GetBackup(ctx, "deleted"); err == nil {
			t.Errorf("the location holds a committed backup %s (%s) whose folder was deleted while it ran", got.Name, got.Status.Phase)
		}
	})

	// events and events.events.k8s.io are one resource served by two
	// groups: it is backed up once, under events.k8s.io.
	t.Run("events once", func(t *testing.T) {
		b, _, err := Run(ctx, cluster, loc, Options{Name: "events", Spec: v1alpha1.BackupSpec{IncludedNamespaces: []string{"a"}}})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.Phase != v1alpha1.PhaseCompleted {
			t.Fatalf("phase %s: %s", b.Status.Phase, b.Status.FailureReason)
		}
		if n := b.Status.ResourceCounts["events"]; n != 0 {
			t.Errorf("%d core events backed up, want 0 (they are backed up as events.events.k8s.io)", n)
		}
		if n := b.Status.ResourceCounts["events.events.k8s.io"]; n < 1 {
			t.Errorf("%d events.events.k8s.io backed up, want the event", n)
		}
		// Asked for by the core group's name only, the events still come, once.
		b, _, err = Run(ctx, cluster, loc, Options{Name: "events-core", Spec: v1alpha1.BackupSpec{IncludedNamespaces: []string{"a"}, IncludedResources: []string{"events"}}})
		if err != nil {
			t.Fatal(err)
		}
		core, grouped := b.Status.ResourceCounts["events"], b.Status.ResourceCounts["events.events.k8s.io"]
		if core != 0 || grouped < 1 {
			t.Errorf("counts %v: want the events once, as events.events.k8s.io", b.Status.ResourceCounts)
		}
	})
}

// relatedApp is a namespace "app" and the cluster-scoped objects around
// it, related or not.
const relatedApp = `apiVersion: v1
kind: Namespace
metadata: {name: app}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: ctl, namespace: app}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: ctl, namespace: other}
---
apiVersion: v1
kind: Service
metadata: {name: hooks, namespace: app}
spec: {ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: app}
spec: {ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata: {name: conv, namespace: app}
spec: {ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata: {name: hooks, namespace: other}
spec: {ports: [{port: 443}]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: app-admin}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {to-app-admin: "true"}}]
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: app-edit, labels: {to-app-admin: "true"}}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {to-app-edit: "true"}}]
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: app-view, labels: {to-app-edit: "true"}}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ctl-role}
rules: [{apiGroups: [""], resources: [secrets], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: other-role}
rules: [{apiGroups: [""], resources: [secrets], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: rb, namespace: app}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: app-admin}
subjects: [{kind: ServiceAccount, name: ctl, namespace: app}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ctl}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ctl-role}
subjects: [{kind: ServiceAccount, name: ctl, namespace: app}, {kind: ServiceAccount, name: ctl, namespace: other}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: other}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: other-role}
subjects: [{kind: ServiceAccount, name: ctl, namespace: other}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: app-hooks}
webhooks:
- name: hooks.app.example
  clientConfig: {service: {namespace: app, name: hooks}}
  rules: [{apiGroups: [conv.example], apiVersions: [v1], operations: [CREATE], resources: [widgets]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Ignore
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: other-hooks}
webhooks:
- name: hooks.other.example
  clientConfig: {service: {namespace: other, name: hooks}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Ignore
  namespaceSelector: {matchLabels: {never: "true"}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.conv.example}
spec:
  group: conv.example
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  conversion:
    strategy: Webhook
    webhook:
      clientConfig: {service: {namespace: app, name: conv, path: /convert}}
      conversionReviewVersions: [v1]
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.other.example}
spec:
  group: other.example
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: app-high}
value: 1000
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: app}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      priorityClassName: app-high
      containers: [{name: web, image: busybox}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.metrics.app.example}
spec:
  group: metrics.app.example
  version: v1
  service: {namespace: app, name: api}
  groupPriorityMinimum: 100
  versionPriority: 10
  insecureSkipTLSVerify: true
`

// TestRelatedObjects: a namespace-filtered backup with
// spec.includeClusterResources "auto" brings the cluster-scoped objects
// around the namespace's ServiceAccounts and Services, each with its
// reasons, and nothing else; "false" brings none of them and "true" all
// (docs/design.md#related-objects).
func TestRelatedObjects(t *testing.T) {
	cluster, loc := startSource(t)
	ctx := context.Background()
	f := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(f, []byte(relatedApp), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Apply(ctx, cluster.Config, "app", f); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"clusterroles.rbac.authorization.k8s.io/app-admin":                     "bound by rolebinding app/rb",
		"clusterroles.rbac.authorization.k8s.io/app-edit":                      "aggregated into clusterrole app-admin",
		"clusterroles.rbac.authorization.k8s.io/app-view":                      "aggregated into clusterrole app-edit",
		"clusterroles.rbac.authorization.k8s.io/ctl-role":                      "granted by clusterrolebinding ctl",
		"clusterrolebindings.rbac.authorization.k8s.io/ctl":                    "bound to serviceaccount app/ctl",
		"mutatingwebhookconfigurations.admissionregistration.k8s.io/app-hooks": "webhook service app/hooks",
		"apiservices.apiregistration.k8s.io/v1.metrics.app.example":            "served by service app/api",
		"customresourcedefinitions.apiextensions.k8s.io/widgets.conv.example":  "conversion webhook service app/conv; resources admitted by mutatingwebhookconfiguration app-hooks",
		"priorityclasses.scheduling.k8s.io/app-high":                           "priority class of deployment app/web; priority class of replicaset app/web-",
	}
	related := func(name string, spec v1alpha1.BackupSpec) (map[string]string, *v1alpha1.Backup) {
		t.Helper()
		b, res, err := Run(ctx, cluster, loc, Options{Name: name, Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.Phase == v1alpha1.PhaseFailed {
			t.Fatalf("%s: phase %s: %s", name, b.Status.Phase, b.Status.FailureReason)
		}
		for _, e := range res.Errors { // the APIService has no backend: its group's discovery fails
			if !strings.Contains(e, "metrics.app.example") {
				t.Errorf("%s: error %s", name, e)
			}
		}
		got := map[string]string{}
		for _, it := range res.Items {
			if it.Outcome == report.BackedUp && it.Reason == RelatedReason {
				got[it.Resource+"/"+it.Name] = it.Message
			}
		}
		return got, b
	}

	got, b := related("auto", v1alpha1.BackupSpec{IncludedNamespaces: []string{"app"}})
	for k, w := range want {
		if !strings.HasPrefix(got[k], w) {
			t.Errorf("%s: reasons %q, want %q", k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s brought (%s), want it left out", k, g)
		}
	}
	for gr, n := range map[string]int{"clusterroles.rbac.authorization.k8s.io": 4, "clusterrolebindings.rbac.authorization.k8s.io": 1,
		"mutatingwebhookconfigurations.admissionregistration.k8s.io": 1, "customresourcedefinitions.apiextensions.k8s.io": 1,
		"validatingwebhookconfigurations.admissionregistration.k8s.io": 0, "apiservices.apiregistration.k8s.io": 1} {
		if b.Status.ResourceCounts[gr] != n {
			t.Errorf("auto: %d %s backed up, want %d", b.Status.ResourceCounts[gr], gr, n)
		}
	}

	// Without ClusterRoleBindings, the ClusterRole only a binding grants stays out.
	got, _ = related("no-crb", v1alpha1.BackupSpec{IncludedNamespaces: []string{"app"}, ExcludedResources: []string{"clusterrolebindings"}})
	if _, ok := got["clusterroles.rbac.authorization.k8s.io/ctl-role"]; ok {
		t.Errorf("clusterrolebindings excluded: ctl-role still brought: %v", got)
	}
	if got["clusterroles.rbac.authorization.k8s.io/app-view"] == "" {
		t.Errorf("clusterrolebindings excluded: the aggregated app-view should still come: %v", got)
	}

	got, b = related("none", v1alpha1.BackupSpec{IncludedNamespaces: []string{"app"}, IncludeClusterResources: "false"})
	if len(got) != 0 || b.Status.ResourceCounts["clusterroles.rbac.authorization.k8s.io"] != 0 || b.Status.ResourceCounts["clusterrolebindings.rbac.authorization.k8s.io"] != 0 {
		t.Errorf("false: related %v, counts %v", got, b.Status.ResourceCounts)
	}

	got, b = related("all", v1alpha1.BackupSpec{IncludedNamespaces: []string{"app"}, IncludeClusterResources: "true"})
	if len(got) != 0 || b.Status.ResourceCounts["clusterrolebindings.rbac.authorization.k8s.io"] < 3 || b.Status.ResourceCounts["validatingwebhookconfigurations.admissionregistration.k8s.io"] != 1 {
		t.Errorf("true: every cluster-scoped object, none as related: related %v, counts %v", got, b.Status.ResourceCounts)
	}
}

// TestBackupDeadline: a backup that reaches its deadline fails, naming
// the field that set it, and is not committed: the location holds no
// backup that looks complete.
func TestBackupDeadline(t *testing.T) {
	cluster, loc := startSource(t)
	ctx := context.Background()
	for _, after := range []time.Duration{time.Nanosecond, 300 * time.Millisecond} {
		name := fmt.Sprintf("late-%d", after.Milliseconds())
		opts := Options{Name: name, Spec: v1alpha1.BackupSpec{IncludeClusterResources: "auto"},
			Deadline: deadline.Deadline{After: after, Field: "spec.timeouts.backup"}}
		// A slow API server: each answer waits, so that the deadline
		// passes while items are listed.
		slow := rest.CopyConfig(cluster.Config)
		slow.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				time.Sleep(50 * time.Millisecond)
				return rt.RoundTrip(r)
			})
		}
		c, err := kube.Connect(ctx, "slow", slow)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = Run(ctx, c, loc, opts)
		want := "spec.timeouts.backup: the backup did not end within " + after.String()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a backup past its deadline (%s): %v, want an error naming %q", after, err, want)
		}
		if _, err := loc.GetBackup(ctx, name); err == nil {
			t.Errorf("a backup past its deadline (%s) was committed", after)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
