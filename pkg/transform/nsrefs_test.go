package transform

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestMapWebhookServices: admission webhooks call a Service by namespace
// and name; after the move they call the moved Service. Unmapped
// namespaces and url webhooks stay, and cert-manager's CA injection
// annotation follows its Certificate's (or Secret's) namespace.
func TestMapWebhookServices(t *testing.T) {
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		u := obj(t, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"`+kind+`","metadata":{"name":"shop-webhook",
		    "annotations":{"cert-manager.io/inject-ca-from":"shop/serving-cert","cert-manager.io/inject-ca-from-secret":"ops/ca","other":"shop/x"}},
		  "webhooks":[{"name":"a.shop.dev","clientConfig":{"service":{"namespace":"shop","name":"guard","path":"/v"},"caBundle":"Y2E="}},
		              {"name":"b.shop.dev","clientConfig":{"service":{"namespace":"monitoring","name":"guard"}}},
		              {"name":"c.shop.dev","clientConfig":{"url":"https://guard.example.com/v"}},
		              {"name":"d.shop.dev","clientConfig":{"service":{"namespace":"ops","name":"guard","port":8443}}}]}`)
		notes := Apply(mapped, "admissionregistration.k8s.io", u)
		for path, want := range map[string]string{
			"webhooks.0.clientConfig": `{"caBundle":"Y2E=","service":{"name":"guard","namespace":"shop2","path":"/v"}}`,
			"webhooks.1.clientConfig": `{"service":{"name":"guard","namespace":"monitoring"}}`,
			"webhooks.2.clientConfig": `{"url":"https://guard.example.com/v"}`,
			"webhooks.3.clientConfig": `{"service":{"name":"guard","namespace":"ops2","port":8443}}`,
		} {
			if got := peer(t, u, path); got != want {
				t.Errorf("%s %s = %s, want %s", kind, path, got, want)
			}
		}
		if got, want := u.GetAnnotations(), map[string]string{"cert-manager.io/inject-ca-from": "shop2/serving-cert", "cert-manager.io/inject-ca-from-secret": "ops2/ca", "other": "shop/x"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s annotations %v, want %v", kind, got, want)
		}
		wantNotes(t, kind, notes,
			"webhooks[0].clientConfig.service.namespace: shop mapped to shop2",
			"webhooks[3].clientConfig.service.namespace: ops mapped to ops2",
			"metadata.annotations[cert-manager.io/inject-ca-from]: shop/serving-cert mapped to shop2/serving-cert",
			"metadata.annotations[cert-manager.io/inject-ca-from-secret]: ops/ca mapped to ops2/ca")
		if hasNote(notes, "monitoring") || hasNote(notes, "other") {
			t.Errorf("%s: notes name what did not change: %q", kind, notes)
		}
	}
}

// TestMapAPIServiceService: an aggregated API's Service follows the
// mapping; a local APIService (no service) is left alone.
func TestMapAPIServiceService(t *testing.T) {
	u := obj(t, `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1beta1.metrics.example.com",
	    "annotations":{"cert-manager.io/inject-ca-from":"shop/metrics-cert"}},
	  "spec":{"group":"metrics.example.com","version":"v1beta1","groupPriorityMinimum":100,"versionPriority":100,
	    "service":{"namespace":"shop","name":"metrics","port":443}}}`)
	notes := Apply(mapped, "apiregistration.k8s.io", u)
	if got := at(t, u, "spec", "service"); got != `{"name":"metrics","namespace":"shop2","port":443}` {
		t.Errorf("spec.service = %s", got)
	}
	if got := u.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "shop2/metrics-cert" {
		t.Errorf("inject-ca-from %q", got)
	}
	wantNotes(t, "APIService", notes, "spec.service.namespace: shop mapped to shop2")
	local := obj(t, `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1.apps"},"spec":{"group":"apps","version":"v1","service":null}}`)
	if notes := Apply(mapped, "apiregistration.k8s.io", local); len(notes) != 0 {
		t.Errorf("local APIService: notes %q", notes)
	}
}

// TestMapCRDConversionService: a CustomResourceDefinition's conversion
// webhook follows the mapping.
func TestMapCRDConversionService(t *testing.T) {
	u := obj(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com",
	    "annotations":{"cert-manager.io/inject-ca-from":"shop/webhook-cert"}},
	  "spec":{"group":"example.com","names":{"kind":"Widget","plural":"widgets"},"scope":"Namespaced",
	    "conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],"clientConfig":{"service":{"namespace":"shop","name":"conv","path":"/convert"}}}}}}`)
	notes := Apply(mapped, "apiextensions.k8s.io", u)
	if got := at(t, u, "spec", "conversion", "webhook", "clientConfig", "service"); got != `{"name":"conv","namespace":"shop2","path":"/convert"}` {
		t.Errorf("conversion service = %s", got)
	}
	if got := u.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "shop2/webhook-cert" {
		t.Errorf("inject-ca-from %q", got)
	}
	wantNotes(t, "CustomResourceDefinition", notes,
		"spec.conversion.webhook.clientConfig.service.namespace: shop mapped to shop2",
		"metadata.annotations[cert-manager.io/inject-ca-from]: shop/webhook-cert mapped to shop2/webhook-cert")
}

// TestMapPolicyBindingParams: an admission policy binding's paramRef
// names the namespace of its parameter objects; it follows the mapping.
// An empty paramRef.namespace (the matched object's own namespace) stays.
func TestMapPolicyBindingParams(t *testing.T) {
	for _, kind := range []string{"ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicyBinding"} {
		u := obj(t, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"`+kind+`","metadata":{"name":"b"},
		  "spec":{"policyName":"p","paramRef":{"name":"limits","namespace":"shop","parameterNotFoundAction":"Deny"}}}`)
		notes := Apply(mapped, "admissionregistration.k8s.io", u)
		if got := at(t, u, "spec", "paramRef"); got != `{"name":"limits","namespace":"shop2","parameterNotFoundAction":"Deny"}` {
			t.Errorf("%s paramRef = %s", kind, got)
		}
		wantNotes(t, kind, notes, "spec.paramRef.namespace: shop mapped to shop2")
		u = obj(t, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"`+kind+`","metadata":{"name":"b"},"spec":{"policyName":"p","paramRef":{"name":"limits"}}}`)
		if notes := Apply(mapped, "admissionregistration.k8s.io", u); len(notes) != 0 || at(t, u, "spec", "paramRef") != `{"name":"limits"}` {
			t.Errorf("%s without paramRef.namespace: notes %q, paramRef %s", kind, notes, at(t, u, "spec", "paramRef"))
		}
	}
}

// TestMapServiceAccountUsernames: RBAC subjects that name a ServiceAccount
// by its username (User system:serviceaccount:<ns>:<name>) or its
// namespace's group (Group system:serviceaccounts:<ns>) follow the
// mapping, as ServiceAccount subjects do; other users and groups, and
// the group of all service accounts, stay.
func TestMapServiceAccountUsernames(t *testing.T) {
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		u := obj(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"`+kind+`","metadata":{"name":"b","namespace":"kube-system"},
		  "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},
		  "subjects":[{"kind":"ServiceAccount","name":"app","namespace":"shop"},
		    {"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"system:serviceaccount:shop:app"},
		    {"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"system:serviceaccounts:ops"},
		    {"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"system:serviceaccount:monitoring:prom"},
		    {"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"system:serviceaccounts"},
		    {"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"shop"}]}`)
		notes := Apply(mapped, "rbac.authorization.k8s.io", u)
		want := `[{"kind":"ServiceAccount","name":"app","namespace":"shop2"},` +
			`{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"system:serviceaccount:shop2:app"},` +
			`{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"system:serviceaccounts:ops2"},` +
			`{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"system:serviceaccount:monitoring:prom"},` +
			`{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"system:serviceaccounts"},` +
			`{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"shop"}]`
		if got := at(t, u, "subjects"); got != want {
			t.Errorf("%s subjects = %s\nwant %s", kind, got, want)
		}
		wantNotes(t, kind, notes,
			"subject ServiceAccount/app: namespace shop mapped to shop2",
			"subjects[1].name: system:serviceaccount:shop:app mapped to system:serviceaccount:shop2:app",
			"subjects[2].name: system:serviceaccounts:ops mapped to system:serviceaccounts:ops2")
		if hasNote(notes, "monitoring") || hasNote(notes, "subjects[4]") || hasNote(notes, "subjects[5]") {
			t.Errorf("%s: notes name what did not change: %q", kind, notes)
		}
	}
}

// TestMapFlowSchemaSubjects: API Priority and Fairness FlowSchemas match
// ServiceAccounts by namespace and name (or by username and group, as
// RBAC does); they follow the mapping.
func TestMapFlowSchemaSubjects(t *testing.T) {
	u := obj(t, `{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema","metadata":{"name":"shop-controllers"},
	  "spec":{"priorityLevelConfiguration":{"name":"workload-high"},"matchingPrecedence":500,
	    "rules":[{"subjects":[
	      {"kind":"ServiceAccount","serviceAccount":{"namespace":"shop","name":"controller"}},
	      {"kind":"ServiceAccount","serviceAccount":{"namespace":"monitoring","name":"*"}},
	      {"kind":"User","user":{"name":"system:serviceaccount:ops:runner"}},
	      {"kind":"Group","group":{"name":"system:serviceaccounts:shop"}}],
	      "resourceRules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"],"namespaces":["shop","ops","kube-system"]}]}]}}`)
	notes := Apply(mapped, "flowcontrol.apiserver.k8s.io", u)
	want := `[{"kind":"ServiceAccount","serviceAccount":{"name":"controller","namespace":"shop2"}},` +
		`{"kind":"ServiceAccount","serviceAccount":{"name":"*","namespace":"monitoring"}},` +
		`{"kind":"User","user":{"name":"system:serviceaccount:ops2:runner"}},` +
		`{"group":{"name":"system:serviceaccounts:shop2"},"kind":"Group"}]`
	if got := peer(t, u, "spec.rules.0.subjects"); got != want {
		t.Errorf("subjects = %s\nwant %s", got, want)
	}
	if got := peer(t, u, "spec.rules.0.resourceRules.0.namespaces"); got != `["shop2","ops2","kube-system"]` {
		t.Errorf("resourceRules namespaces = %s", got)
	}
	wantNotes(t, "FlowSchema", notes,
		"spec.rules[0].subjects[0].serviceAccount.namespace: shop mapped to shop2",
		"spec.rules[0].subjects[2].user.name: system:serviceaccount:ops:runner mapped to system:serviceaccount:ops2:runner",
		"spec.rules[0].subjects[3].group.name: system:serviceaccounts:shop mapped to system:serviceaccounts:shop2",
		"spec.rules[0].resourceRules[0].namespaces: shop mapped to shop2")
}

// TestMapClassAndVolumeSecretRefs: cluster-scoped objects that name a
// namespaced object by namespace follow the mapping: an IngressClass's
// parameters, a PersistentVolume's CSI secrets and a StorageClass's CSI
// secret-namespace parameters (literal names only, not templates).
func TestMapClassAndVolumeSecretRefs(t *testing.T) {
	ic := obj(t, `{"apiVersion":"networking.k8s.io/v1","kind":"IngressClass","metadata":{"name":"shop-lb"},
	  "spec":{"controller":"example.com/lb","parameters":{"apiGroup":"example.com","kind":"LBConfig","name":"cfg","scope":"Namespace","namespace":"shop"}}}`)
	notes := Apply(mapped, "networking.k8s.io", ic)
	if got := at(t, ic, "spec", "parameters", "namespace"); got != `"shop2"` {
		t.Errorf("IngressClass parameters namespace %s", got)
	}
	wantNotes(t, "IngressClass", notes, "spec.parameters.namespace: shop mapped to shop2")

	pv := obj(t, `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv1"},
	  "spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],
	    "csi":{"driver":"rbd.csi.ceph.com","volumeHandle":"h",
	      "nodeStageSecretRef":{"name":"csi-rbd","namespace":"ops"},
	      "controllerExpandSecretRef":{"name":"csi-rbd","namespace":"ops"},
	      "nodePublishSecretRef":{"name":"other","namespace":"monitoring"}}}}`)
	notes = Apply(mapped, "", pv)
	if got := at(t, pv, "spec", "csi"); got != `{"controllerExpandSecretRef":{"name":"csi-rbd","namespace":"ops2"},"driver":"rbd.csi.ceph.com","nodePublishSecretRef":{"name":"other","namespace":"monitoring"},"nodeStageSecretRef":{"name":"csi-rbd","namespace":"ops2"},"volumeHandle":"h"}` {
		t.Errorf("PersistentVolume csi = %s", got)
	}
	wantNotes(t, "PersistentVolume", notes,
		"spec.csi.nodeStageSecretRef.namespace: ops mapped to ops2",
		"spec.csi.controllerExpandSecretRef.namespace: ops mapped to ops2")

	sc := obj(t, `{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"rbd"},"provisioner":"rbd.csi.ceph.com",
	  "parameters":{"clusterID":"shop","csi.storage.k8s.io/provisioner-secret-namespace":"ops","csi.storage.k8s.io/node-stage-secret-namespace":"${pvc.namespace}",
	    "csi.storage.k8s.io/controller-expand-secret-namespace":"ops"}}`)
	notes = Apply(mapped, "storage.k8s.io", sc)
	if got := at(t, sc, "parameters"); got != `{"clusterID":"shop","csi.storage.k8s.io/controller-expand-secret-namespace":"ops2","csi.storage.k8s.io/node-stage-secret-namespace":"${pvc.namespace}","csi.storage.k8s.io/provisioner-secret-namespace":"ops2"}` {
		t.Errorf("StorageClass parameters = %s", got)
	}
	wantNotes(t, "StorageClass", notes, "parameters[csi.storage.k8s.io/provisioner-secret-namespace]: ops mapped to ops2")
}

// TestNamespaceReferencesNoMapping: without a mapping nothing changes and
// nothing is noted.
func TestNamespaceReferencesNoMapping(t *testing.T) {
	u := obj(t, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"w","annotations":{"cert-manager.io/inject-ca-from":"shop/c"}},
	  "webhooks":[{"name":"a.shop.dev","clientConfig":{"service":{"namespace":"shop","name":"guard"}}}]}`)
	before := at(t, u, "webhooks")
	if notes := Apply(&Context{}, "admissionregistration.k8s.io", u); len(notes) != 0 || at(t, u, "webhooks") != before || u.GetAnnotations()["cert-manager.io/inject-ca-from"] != "shop/c" {
		t.Errorf("no mapping: notes %q, webhooks %s, annotations %v", notes, at(t, u, "webhooks"), u.GetAnnotations())
	}
}

// realCorpus is the folder of real public manifests beside the worktree
// (CONTRIBUTING.md, "The test corpus").
const realCorpus = "../../../shared/testdata/real"

// readManifests decodes every object of a multi-document YAML file.
func readManifests(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the corpus: %v", err)
	}
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if m["kind"] != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// namespaceRefs returns, for every field named namespace, every
// annotation value and every string value of a name field under u, those
// that name one of olds: "path=value".
func namespaceRefs(v any, at string, olds []string, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			namespaceRefs(c, at+"."+k, olds, out)
			s, ok := c.(string)
			if !ok {
				continue
			}
			for _, o := range olds {
				if (k == "namespace" && s == o) || strings.HasPrefix(s, o+"/") || strings.Contains(s, "serviceaccount:"+o+":") || strings.HasSuffix(s, "serviceaccounts:"+o) {
					*out = append(*out, at+"."+k+"="+s)
				}
			}
		}
	case []any:
		for i, c := range x {
			namespaceRefs(c, fmt.Sprintf("%s[%d]", at, i), olds, out)
		}
	}
}

// TestNamespaceReferencesCorpus: the real cert-manager v1.14.4 manifest
// and kube-state-metrics' webhook and binding manifests, restored with
// their namespaces mapped, name the old namespaces nowhere: not in a
// webhook's service, a binding's subject, cert-manager's CA injection
// annotation, or an object's own namespace.
func TestNamespaceReferencesCorpus(t *testing.T) {
	c := &Context{NamespaceMapping: map[string]string{"cert-manager": "cm2", "apples": "apples2", "default": "default2"}}
	files := []string{filepath.Join(realCorpus, "cert-manager-v1.14.4", "cert-manager.yaml")}
	for _, f := range []string{"mutatingwebhookconfiguration", "validatingwebhookconfiguration", "clusterrolebinding"} {
		files = append(files, filepath.Join(realCorpus, "ksm-test-manifests-all-kinds", f+".yaml"))
	}
	noted := map[string]int{}
	for _, f := range files {
		for _, u := range readManifests(t, f) {
			gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
			if err != nil {
				t.Fatal(err)
			}
			notes := Apply(c, gv.Group, u)
			noted[u.GetKind()] += len(notes)
			var left []string
			namespaceRefs(u.Object, "", []string{"cert-manager", "apples", "default"}, &left)
			if len(left) > 0 {
				t.Errorf("%s %s %s still names an old namespace: %v", filepath.Base(f), u.GetKind(), u.GetName(), left)
			}
		}
	}
	// cert-manager: 2 webhook services + 2 injection annotations, and the
	// ksm webhooks' service: 3 + 2 notes for the webhook configurations.
	for kind, want := range map[string]int{"MutatingWebhookConfiguration": 3, "ValidatingWebhookConfiguration": 3} {
		if noted[kind] != want {
			t.Errorf("%s: %d notes, want %d", kind, noted[kind], want)
		}
	}
}
