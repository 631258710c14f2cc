package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// referenceObjects are the source objects of TestNamespaceReferences: a
// webhook backend's Service and ServiceAccount in shop (mapped to shop2),
// and the cluster-scoped objects that name them: webhook configurations
// (on a made-up resource, failurePolicy Ignore, so they cannot get in the
// API server's way), a CRD whose conversion webhook is that Service, and
// ClusterRoleBindings to the ServiceAccount as a ServiceAccount subject,
// as its username and as its namespace's group; and a RoleBinding in ops
// (not mapped) to it.
const referenceObjects = `
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: Namespace
metadata:
  name: ops
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: guard
  namespace: shop
---
apiVersion: v1
kind: Service
metadata:
  name: guard
  namespace: shop
spec:
  selector: {app: guard}
  ports:
  - {port: 443, targetPort: 8443}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: shop-guard
  annotations:
    cert-manager.io/inject-ca-from: shop/guard-cert
webhooks:
- name: mutate.guard.shop.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig:
    service: {namespace: shop, name: guard, path: /mutate}
  rules:
  - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: shop-guard
  annotations:
    cert-manager.io/inject-ca-from-secret: shop/guard-ca
webhooks:
- name: validate.guard.shop.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig:
    service: {namespace: shop, name: guard, path: /validate, port: 443}
  rules:
  - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [widgets]}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {namespace: shop, name: guard, path: /convert}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: guard-get-widgets
rules:
- {apiGroups: [example.com], resources: [widgets], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: guard-list-widgets
rules:
- {apiGroups: [example.com], resources: [widgets], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: guard-watch-widgets
rules:
- {apiGroups: [example.com], resources: [widgets], verbs: [watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: guard-get-widgets
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: guard-get-widgets}
subjects:
- {kind: ServiceAccount, name: guard, namespace: shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: guard-list-widgets
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: guard-list-widgets}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:serviceaccount:shop:guard"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: guard-watch-widgets
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: guard-watch-widgets}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:serviceaccounts:shop"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: shop-guard-views-ops
  namespace: ops
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects:
- {kind: ServiceAccount, name: guard, namespace: shop}
`

// TestNamespaceReferences checks docs/design.md#namespace-references on
// real API servers: restored with --namespace-mappings shop:shop2, the
// webhook configurations and the CRD's conversion webhook call
// shop2/guard, cert-manager's CA injection annotations name shop2, and
// the target's RBAC grants the moved ServiceAccount shop2/guard what the
// bindings granted shop/guard, by each form of subject (asked of the
// target's authorizer with SubjectAccessReviews). Each rewrite is in its
// item's changes, and the verification finds nothing unexpected.
func TestNamespaceReferences(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	ctx := context.Background()
	e := newEnv(t)
	applyYAML(t, e.src.Config, "references.yaml", referenceObjects)
	e.backup(t, "refs", "--include-namespaces", "shop,ops", "--include-cluster-resources", "true", "--include-resources",
		"namespaces,serviceaccounts,services,mutatingwebhookconfigurations,validatingwebhookconfigurations,customresourcedefinitions,clusterroles,clusterrolebindings,rolebindings")
	rs, r := e.restore(t, "refs", "refs", "--namespace-mappings", "shop:shop2")
	if r.code != 0 || rs.Status.Phase != "Completed" {
		t.Fatalf("restore: exit %d, phase %q\nstderr: %s\nfailed: %v", r.code, rs.Status.Phase, r.stderr, failedItems(t, e, "refs"))
	}
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	if _, err := dst.CoreV1().Services("shop2").Get(ctx, "guard", metav1.GetOptions{}); err != nil {
		t.Fatalf("shop2/guard: %v", err)
	}

	// The webhooks call the moved Service.
	if w, err := dst.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "shop-guard", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if s := w.Webhooks[0].ClientConfig.Service; s == nil || s.Namespace != "shop2" || s.Name != "guard" || w.Annotations["cert-manager.io/inject-ca-from"] != "shop2/guard-cert" {
		t.Errorf("mutating shop-guard: service %+v, annotations %v, want shop2/guard and shop2/guard-cert", s, w.Annotations)
	}
	if w, err := dst.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "shop-guard", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if s := w.Webhooks[0].ClientConfig.Service; s == nil || s.Namespace != "shop2" || s.Name != "guard" || w.Annotations["cert-manager.io/inject-ca-from-secret"] != "shop2/guard-ca" {
		t.Errorf("validating shop-guard: service %+v, annotations %v, want shop2/guard and shop2/guard-ca", s, w.Annotations)
	}
	crds := dynamic.NewForConfigOrDie(e.dst.Config).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if crd, err := crds.Get(ctx, "widgets.example.com", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if ns, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "namespace"); ns != "shop2" {
		t.Errorf("CRD widgets.example.com: conversion webhook service in %q, want shop2", ns)
	}

	// The target grants the moved ServiceAccount what the source granted
	// the old one, through each binding.
	for verb, binding := range map[string]string{"get": "ServiceAccount subject", "list": "username subject", "watch": "group subject"} {
		if !allowed(t, dst, "shop2", "guard", &authorizationv1.ResourceAttributes{Group: "example.com", Resource: "widgets", Verb: verb}) {
			t.Errorf("shop2/guard may not %s widgets in the target: the ClusterRoleBinding's %s was not mapped", verb, binding)
		}
	}
	if !allowed(t, dst, "shop2", "guard", &authorizationv1.ResourceAttributes{Namespace: "ops", Resource: "configmaps", Verb: "list"}) {
		t.Errorf("shop2/guard may not list configmaps in ops: the RoleBinding ops/shop-guard-views-ops was not mapped")
	}
	if b, err := dst.RbacV1().ClusterRoleBindings().Get(ctx, "guard-list-widgets", metav1.GetOptions{}); err != nil || len(b.Subjects) != 1 || b.Subjects[0] != (rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "system:serviceaccount:shop2:guard"}) {
		t.Errorf("guard-list-widgets: %v %+v", err, b)
	}

	// Each rewrite is a change on purpose in its item's result.
	notes := map[string]string{}
	for _, res := range []string{"mutatingwebhookconfigurations.admissionregistration.k8s.io", "validatingwebhookconfigurations.admissionregistration.k8s.io",
		"customresourcedefinitions.apiextensions.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io"} {
		for name, c := range itemChanges(t, e, "refs", res) {
			notes[res+"/"+name] += c
		}
	}
	for item, want := range map[string][]string{
		"mutatingwebhookconfigurations.admissionregistration.k8s.io/shop-guard": {"webhooks[0].clientConfig.service.namespace: shop mapped to shop2",
			"metadata.annotations[cert-manager.io/inject-ca-from]: shop/guard-cert mapped to shop2/guard-cert"},
		"validatingwebhookconfigurations.admissionregistration.k8s.io/shop-guard": {"webhooks[0].clientConfig.service.namespace: shop mapped to shop2",
			"metadata.annotations[cert-manager.io/inject-ca-from-secret]: shop/guard-ca mapped to shop2/guard-ca"},
		"customresourcedefinitions.apiextensions.k8s.io/widgets.example.com": {"spec.conversion.webhook.clientConfig.service.namespace: shop mapped to shop2"},
		"clusterrolebindings.rbac.authorization.k8s.io/guard-get-widgets":    {"subject ServiceAccount/guard: namespace shop mapped to shop2"},
		"clusterrolebindings.rbac.authorization.k8s.io/guard-list-widgets":   {"subjects[0].name: system:serviceaccount:shop:guard mapped to system:serviceaccount:shop2:guard"},
		"clusterrolebindings.rbac.authorization.k8s.io/guard-watch-widgets":  {"subjects[0].name: system:serviceaccounts:shop mapped to system:serviceaccounts:shop2"},
		"rolebindings.rbac.authorization.k8s.io/shop-guard-views-ops":        {"subject ServiceAccount/guard: namespace shop mapped to shop2"},
	} {
		for _, w := range want {
			if !strings.Contains(notes[item], w) {
				t.Errorf("%s: changes %q do not say %q", item, notes[item], w)
			}
		}
	}

	dir := filepath.Join(t.TempDir(), "report")
	vr := e.run(t, "verify", "--backup", "refs", "--restore", "refs", "--to-context", "dst", "--report-dir", dir)
	if v := readVerification(t, dir); vr.code != 0 || v.Summary["unexpected"] != 0 {
		t.Errorf("verify: exit %d, %d unexpected differences: %+v\n%s", vr.code, v.Summary["unexpected"], v.Differences, vr.stderr)
	}
}

// allowed asks the target's authorizer whether ServiceAccount ns/name,
// with the groups every ServiceAccount has, may do attrs.
func allowed(t *testing.T, cs kubernetes.Interface, ns, name string, attrs *authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + name,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: attrs,
	}}
	got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}
