package transform

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/kube"
)

// selectorPaths are where objects of each admissionregistration kind
// keep a namespace selector ([] marks a list whose items each have one).
var selectorPaths = map[string][]string{
	"MutatingWebhookConfiguration":     {"webhooks", "[]", "namespaceSelector"},
	"ValidatingWebhookConfiguration":   {"webhooks", "[]", "namespaceSelector"},
	"ValidatingAdmissionPolicy":        {"spec", "matchConstraints", "namespaceSelector"},
	"MutatingAdmissionPolicy":          {"spec", "matchConstraints", "namespaceSelector"},
	"ValidatingAdmissionPolicyBinding": {"spec", "matchResources", "namespaceSelector"},
	"MutatingAdmissionPolicyBinding":   {"spec", "matchResources", "namespaceSelector"},
}

// affinityTerms are where a pod spec's affinity keeps pod affinity terms.
var affinityTerms = [][]string{
	{"affinity", "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "[]"},
	{"affinity", "podAffinity", "preferredDuringSchedulingIgnoredDuringExecution", "[]", "podAffinityTerm"},
	{"affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "[]"},
	{"affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution", "[]", "podAffinityTerm"},
}

// selectsNamespaces reports whether objects of group and kind can hold a
// namespace selector: NetworkPolicies, admission webhooks and policies,
// and workloads (pod affinity terms).
func selectsNamespaces(group, kind string) bool {
	switch group {
	case "networking.k8s.io":
		return kind == "NetworkPolicy"
	case "admissionregistration.k8s.io":
		return selectorPaths[kind] != nil
	}
	_, ok := kube.PodSpecPathOf(group, kind)
	return ok
}

// MapNamespaceSelectors applies the namespace mapping to what selects
// namespaces by name, so that a moved object still selects what it
// selected, its own namespace included (docs/design.md#namespace-selectors):
// namespace selectors on kubernetes.io/metadata.name (matchLabels, and
// matchExpressions In/NotIn) of NetworkPolicy peers, admission webhooks
// and admission policies and their bindings, and of pod affinity and
// anti-affinity terms in every workload's pod spec, whose namespaces
// lists are mapped too. ResourceQuota scopes select pods by their
// properties, never namespaces, so they are left alone. Each rewrite is
// noted.
func MapNamespaceSelectors(c *Context, u *unstructured.Unstructured) []string {
	if len(c.NamespaceMapping) == 0 {
		return nil
	}
	m := &selectorMapper{c: c}
	group, kind := u.GroupVersionKind().Group, u.GetKind()
	switch {
	case group == "networking.k8s.io" && kind == "NetworkPolicy":
		m.walk(u.Object, []string{"spec", "ingress", "[]", "from", "[]", "namespaceSelector"}, "", m.selector)
		m.walk(u.Object, []string{"spec", "egress", "[]", "to", "[]", "namespaceSelector"}, "", m.selector)
	case group == "admissionregistration.k8s.io":
		if p := selectorPaths[kind]; p != nil {
			m.walk(u.Object, p, "", m.selector)
		}
	default:
		path, ok := kube.PodSpecPathOf(group, kind)
		if !ok {
			return nil
		}
		for _, term := range affinityTerms {
			p := append(append([]string{}, path...), term...)
			m.walk(u.Object, append(p, "namespaceSelector"), "", m.selector)
			m.walk(u.Object, append(p, "namespaces"), "", m.namespaces)
		}
	}
	return m.notes
}

// selectorMapper rewrites namespace selectors and lists, noting each change.
type selectorMapper struct {
	c     *Context
	notes []string
}

// walk calls f on the value at path under v, where "[]" in path stands
// for each item of a list; at is the field path so far
// ("spec.ingress[0].from[1]"), for the notes.
func (m *selectorMapper) walk(v any, path []string, at string, f func(v any, at string)) {
	if len(path) == 0 {
		if v != nil {
			f(v, at)
		}
		return
	}
	if path[0] == "[]" {
		list, _ := v.([]any)
		for n, item := range list {
			m.walk(item, path[1:], fmt.Sprintf("%s[%d]", at, n), f)
		}
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	next := path[0]
	if at != "" {
		next = at + "." + path[0]
	}
	m.walk(obj[path[0]], path[1:], next, f)
}

// selector maps the namespace names a LabelSelector selects by
// kubernetes.io/metadata.name.
func (m *selectorMapper) selector(v any, at string) {
	sel, ok := v.(map[string]any)
	if !ok {
		return
	}
	if ml, ok := sel["matchLabels"].(map[string]any); ok {
		if ns, ok := ml[corev1.LabelMetadataName].(string); ok {
			if t := m.c.MapNamespace(ns); t != ns {
				ml[corev1.LabelMetadataName] = t
				m.notes = append(m.notes, fmt.Sprintf("%s: %s %s mapped to %s", at, corev1.LabelMetadataName, ns, t))
			}
		}
	}
	exprs, _ := sel["matchExpressions"].([]any)
	for i, e := range exprs {
		em, _ := e.(map[string]any)
		if em == nil || em["key"] != corev1.LabelMetadataName || (em["operator"] != "In" && em["operator"] != "NotIn") {
			continue
		}
		m.names(em["values"], fmt.Sprintf("%s.matchExpressions[%d] (%s %s)", at, i, corev1.LabelMetadataName, em["operator"]))
	}
}

// namespaces maps a list of namespace names (a pod affinity term's namespaces).
func (m *selectorMapper) namespaces(v any, at string) { m.names(v, at) }

func (m *selectorMapper) names(v any, at string) {
	list, _ := v.([]any)
	for i, n := range list {
		ns, ok := n.(string)
		if !ok {
			continue
		}
		if t := m.c.MapNamespace(ns); t != ns {
			list[i] = t
			m.notes = append(m.notes, fmt.Sprintf("%s: %s mapped to %s", at, ns, t))
		}
	}
}
