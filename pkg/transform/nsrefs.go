package transform

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// namespaceFields are, by group and kind, the string fields where an
// object names the namespace of another object: the Service a webhook or
// an aggregated API calls, an admission policy's parameters, a
// FlowSchema's ServiceAccount, an IngressClass's parameters, a
// PersistentVolume's secrets ([] marks each item of a list).
var namespaceFields = map[schema.GroupKind][][]string{
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     {{"webhooks", "[]", "clientConfig", "service", "namespace"}},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   {{"webhooks", "[]", "clientConfig", "service", "namespace"}},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: {{"spec", "paramRef", "namespace"}},
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   {{"spec", "paramRef", "namespace"}},
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             {{"spec", "service", "namespace"}},
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 {{"spec", "conversion", "webhook", "clientConfig", "service", "namespace"}},
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       {{"spec", "rules", "[]", "subjects", "[]", "serviceAccount", "namespace"}},
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                {{"spec", "parameters", "namespace"}},
	{Group: "", Kind: "PersistentVolume"}: {
		{"spec", "csi", "controllerPublishSecretRef", "namespace"},
		{"spec", "csi", "nodeStageSecretRef", "namespace"},
		{"spec", "csi", "nodePublishSecretRef", "namespace"},
		{"spec", "csi", "controllerExpandSecretRef", "namespace"},
		{"spec", "csi", "nodeExpandSecretRef", "namespace"},
		{"spec", "cephfs", "secretRef", "namespace"},
		{"spec", "rbd", "secretRef", "namespace"},
		{"spec", "iscsi", "secretRef", "namespace"},
		{"spec", "flexVolume", "secretRef", "namespace"},
		{"spec", "cinder", "secretRef", "namespace"},
		{"spec", "scaleIO", "secretRef", "namespace"},
		{"spec", "storageos", "secretRef", "namespace"},
		{"spec", "azureFile", "secretNamespace"},
	},
}

// caInjectionKinds are the kinds whose CA bundle cert-manager's
// cainjector fills in from the Certificate or Secret that its
// annotations name as <namespace>/<name>.
var caInjectionKinds = map[schema.GroupKind]bool{
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                           true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               true,
}

var caInjectionAnnotations = []string{"cert-manager.io/inject-ca-from", "cert-manager.io/inject-ca-from-secret"}

// The forms in which Kubernetes authentication names a ServiceAccount
// (k8s.io/apiserver/pkg/authentication/serviceaccount): its username
// system:serviceaccount:<namespace>:<name>, and the group of its
// namespace's ServiceAccounts, system:serviceaccounts:<namespace>.
const (
	serviceAccountUsernamePrefix = "system:serviceaccount:"
	serviceAccountGroupPrefix    = "system:serviceaccounts:"
)

// refersToNamespaces reports whether objects of group and kind can name
// another object's namespace (MapNamespaceReferences).
func refersToNamespaces(group, kind string) bool {
	gk := schema.GroupKind{Group: group, Kind: kind}
	switch {
	case namespaceFields[gk] != nil:
		return true
	case group == "rbac.authorization.k8s.io":
		return kind == "RoleBinding" || kind == "ClusterRoleBinding"
	}
	return group == "storage.k8s.io" && kind == "StorageClass"
}

// MapNamespaceReferences applies the namespace mapping to the fields
// where an object names another object's namespace, so that a moved
// webhook still calls its moved Service (docs/design.md#namespace-references):
// admission webhooks', aggregated APIs' and CRD conversion webhooks'
// Services, admission policy bindings' paramRef, FlowSchema subjects and
// namespaces, IngressClass parameters, PersistentVolume secrets and
// StorageClass CSI secret namespaces, ServiceAccounts named by username
// or group in RoleBinding and ClusterRoleBinding subjects (ServiceAccount
// subjects are MapNamespaces'), and cert-manager's CA injection
// annotations. Each rewrite is noted.
func MapNamespaceReferences(c *Context, u *unstructured.Unstructured) []string {
	if len(c.NamespaceMapping) == 0 {
		return nil
	}
	m := &selectorMapper{c: c}
	gk := u.GroupVersionKind().GroupKind()
	for _, p := range namespaceFields[gk] {
		key := p[len(p)-1]
		m.walk(u.Object, p[:len(p)-1], "", func(v any, at string) { m.field(v, at, key, m.c.MapNamespace) })
	}
	switch gk.Group {
	case "rbac.authorization.k8s.io":
		m.walk(u.Object, []string{"subjects", "[]"}, "", m.rbacSubject)
	case "flowcontrol.apiserver.k8s.io":
		rule := []string{"spec", "rules", "[]"}
		m.walk(u.Object, append(rule, "subjects", "[]", "user"), "", func(v any, at string) { m.field(v, at, "name", m.username) })
		m.walk(u.Object, append(rule, "subjects", "[]", "group"), "", func(v any, at string) { m.field(v, at, "name", m.group) })
		m.walk(u.Object, append(rule, "resourceRules", "[]", "namespaces"), "", m.namespaces)
	case "storage.k8s.io":
		m.storageClassSecrets(u)
	}
	if caInjectionKinds[gk] {
		m.caInjection(u)
	}
	return m.notes
}

// field maps the string at obj[key] through f, noting a change.
func (m *selectorMapper) field(v any, at, key string, f func(string) string) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	s, ok := obj[key].(string)
	if !ok || s == "" {
		return
	}
	if t := f(s); t != s {
		obj[key] = t
		m.notes = append(m.notes, fmt.Sprintf("%s.%s: %s mapped to %s", at, key, s, t))
	}
}

// rbacSubject maps a User subject that is a ServiceAccount's username and
// a Group subject that is a namespace's ServiceAccounts.
func (m *selectorMapper) rbacSubject(v any, at string) {
	s, _ := v.(map[string]any)
	switch s["kind"] {
	case "User":
		m.field(s, at, "name", m.username)
	case "Group":
		m.field(s, at, "name", m.group)
	}
}

// username maps system:serviceaccount:<namespace>:<name>.
func (m *selectorMapper) username(s string) string {
	rest, ok := strings.CutPrefix(s, serviceAccountUsernamePrefix)
	if !ok {
		return s
	}
	ns, name, ok := strings.Cut(rest, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return s
	}
	return serviceAccountUsernamePrefix + m.c.MapNamespace(ns) + ":" + name
}

// group maps system:serviceaccounts:<namespace>.
func (m *selectorMapper) group(s string) string {
	ns, ok := strings.CutPrefix(s, serviceAccountGroupPrefix)
	if !ok || ns == "" || strings.Contains(ns, ":") {
		return s
	}
	return serviceAccountGroupPrefix + m.c.MapNamespace(ns)
}

// storageClassSecrets maps the CSI secret namespaces a StorageClass's
// parameters name (csi.storage.k8s.io/*-secret-namespace); a template
// such as ${pvc.namespace} is not a namespace name and stays.
func (m *selectorMapper) storageClassSecrets(u *unstructured.Unstructured) {
	params, _ := u.Object["parameters"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(params)) {
		s, ok := params[k].(string)
		if !ok || !strings.HasPrefix(k, "csi.storage.k8s.io/") || !strings.HasSuffix(k, "-secret-namespace") {
			continue
		}
		if t := m.c.MapNamespace(s); t != s {
			params[k] = t
			m.notes = append(m.notes, fmt.Sprintf("parameters[%s]: %s mapped to %s", k, s, t))
		}
	}
}

// caInjection maps the <namespace>/<name> of cert-manager's CA injection
// annotations.
func (m *selectorMapper) caInjection(u *unstructured.Unstructured) {
	ann := u.GetAnnotations()
	changed := false
	for _, k := range caInjectionAnnotations {
		ns, name, ok := strings.Cut(ann[k], "/")
		if !ok {
			continue
		}
		if t := m.c.MapNamespace(ns); t != ns {
			ann[k] = t + "/" + name
			changed = true
			m.notes = append(m.notes, fmt.Sprintf("metadata.annotations[%s]: %s/%s mapped to %s/%s", k, ns, name, t, name))
		}
	}
	if changed {
		u.SetAnnotations(ann)
	}
}
