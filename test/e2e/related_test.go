package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

// unrelatedRBAC is bound to a ServiceAccount of another namespace: a
// backup of cert-manager must not bring it.
const unrelatedRBAC = `apiVersion: v1
kind: Namespace
metadata: {name: elsewhere}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: cert-manager, namespace: elsewhere}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: elsewhere-role}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: elsewhere-binding}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: elsewhere-role}
subjects: [{kind: ServiceAccount, name: cert-manager, namespace: elsewhere}]
`

// relatedKinds are the cluster-scoped kinds of the cert-manager set that a
// backup of its namespace must bring, with the start of the reason each
// must show in backup describe.
var relatedKinds = map[string]string{
	"ClusterRoleBinding":             "bound to serviceaccount cert-manager/",
	"ClusterRole":                    "",
	"MutatingWebhookConfiguration":   "webhook service cert-manager/cert-manager-webhook",
	"ValidatingWebhookConfiguration": "webhook service cert-manager/cert-manager-webhook",
}

// TestRelatedCertManager backs up the cert-manager corpus set by its
// namespace with --include-cluster-resources=auto (the default) and
// restores it into an empty cluster: every ClusterRoleBinding,
// ClusterRole and webhook configuration of the set arrives, and backup
// describe gives each one's reason (docs/design.md#related-objects).
func TestRelatedCertManager(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	objs, err := testenv.Apply(ctx, e.src.Config, "cert-manager", filepath.Join(corpusDir(t), "cert-manager-v1.14.4", "cert-manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(t.TempDir(), "unrelated.yaml")
	if err := os.WriteFile(extra, []byte(unrelatedRBAC), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Apply(ctx, e.src.Config, "elsewhere", extra); err != nil {
		t.Fatal(err)
	}

	b := e.backup(t, "cm", "--include-namespaces", "cert-manager")
	if b.Status.Phase != "Completed" {
		t.Fatalf("backup phase %s: %s", b.Status.Phase, b.Status.FailureReason)
	}
	if _, res := e.restore(t, "cm", "cm"); res.code != 0 {
		t.Fatalf("restore: exit %d: %s %s\nfailed: %v", res.code, res.stdout, res.stderr, failedItems(t, e, "cm"))
	}
	reasons := relatedReasons(t, e, "cm")
	text := e.run(t, "backup", "describe", "cm")
	if text.code != 0 {
		t.Fatalf("backup describe: %s", text.stderr)
	}
	dst := newClient(t, e.dst.Config)
	checked := 0
	for _, o := range objs {
		want, ok := relatedKinds[o.GetKind()]
		if !ok {
			continue
		}
		checked++
		name := o.GetName()
		if dst.get(t, o, "", name) == nil {
			t.Errorf("%s %s of the set is missing in the target", o.GetKind(), name)
		}
		why := reasons[strings.ToLower(o.GetKind())+"/"+name]
		switch {
		case why == "":
			t.Errorf("%s %s: backup describe -o json gives no reason", o.GetKind(), name)
		case o.GetKind() == "ClusterRole" && !strings.HasPrefix(why, "granted by clusterrolebinding ") && !strings.HasPrefix(why, "grants only on included CRDs of "):
			t.Errorf("ClusterRole %s: reason %q, want granted by its binding or for the CRDs it grants on", name, why)
		case !strings.HasPrefix(why, want):
			t.Errorf("%s %s: reason %q, want %q…", o.GetKind(), name, why, want)
		}
		if !describeLists(text.stdout, name, why) {
			t.Errorf("backup describe does not list %s %s with its reason %q", o.GetKind(), name, why)
		}
	}
	if checked != 13+10+2 {
		t.Errorf("checked %d objects of the set, want 13 ClusterRoles, 10 ClusterRoleBindings, 2 webhook configurations", checked)
	}
	// The binding's own ClusterRole is granted by it.
	if why := reasons["clusterrole/cert-manager-controller-issuers"]; why != "granted by clusterrolebinding cert-manager-controller-issuers" {
		t.Errorf("ClusterRole cert-manager-controller-issuers: reason %q", why)
	}
	if why := reasons["clusterrolebinding/cert-manager-webhook:subjectaccessreviews"]; why != "bound to serviceaccount cert-manager/cert-manager-webhook" {
		t.Errorf("ClusterRoleBinding cert-manager-webhook:subjectaccessreviews: reason %q", why)
	}

	cs := kubernetes.NewForConfigOrDie(e.dst.Config)
	if _, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, "elsewhere-binding", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRoleBinding elsewhere-binding binds another namespace's ServiceAccount but arrived (err %v)", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Get(ctx, "elsewhere-role", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole elsewhere-role arrived (err %v)", err)
	}

	// --include-cluster-resources=false still brings nothing.
	none := e.backup(t, "cm-none", "--include-namespaces", "cert-manager", "--include-cluster-resources=false")
	for _, gr := range []string{"clusterroles.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io",
		"mutatingwebhookconfigurations.admissionregistration.k8s.io", "validatingwebhookconfigurations.admissionregistration.k8s.io",
		"customresourcedefinitions.apiextensions.k8s.io"} {
		if n := none.Status.ResourceCounts[gr]; n != 0 {
			t.Errorf("--include-cluster-resources=false backed up %d %s", n, gr)
		}
	}
	if r := relatedReasons(t, e, "cm-none"); len(r) != 0 {
		t.Errorf("--include-cluster-resources=false: related objects %v", r)
	}
}

// relatedReasons reads backup describe -o json: the reason of each
// related object, by "kind/name" (the resource's singular kind).
func relatedReasons(t *testing.T, e *env, backup string) map[string]string {
	t.Helper()
	r := e.run(t, "backup", "describe", backup, "-o", "json")
	if r.code != 0 {
		t.Fatalf("backup describe %s: %s", backup, r.stderr)
	}
	var out struct {
		Results struct {
			Items []struct {
				Resource, Name, Outcome, Reason, Message string
			} `json:"items"`
		} `json:"results"`
	}
	mustJSON(t, r.stdout, &out)
	kinds := map[string]string{
		"clusterroles.rbac.authorization.k8s.io":                       "clusterrole",
		"clusterrolebindings.rbac.authorization.k8s.io":                "clusterrolebinding",
		"mutatingwebhookconfigurations.admissionregistration.k8s.io":   "mutatingwebhookconfiguration",
		"validatingwebhookconfigurations.admissionregistration.k8s.io": "validatingwebhookconfiguration",
		"customresourcedefinitions.apiextensions.k8s.io":               "customresourcedefinition",
	}
	reasons := map[string]string{}
	for _, it := range out.Results.Items {
		if it.Outcome != "backedUp" || it.Reason != "related" {
			continue
		}
		k := kinds[it.Resource]
		if k == "" {
			k = it.Resource
		}
		reasons[k+"/"+it.Name] = it.Message
	}
	return reasons
}

// describeLists reports whether backup describe's text has a line with
// name and why.
func describeLists(text, name, why string) bool {
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == name && strings.HasSuffix(strings.TrimSpace(line), why) {
			return true
		}
	}
	return false
}
