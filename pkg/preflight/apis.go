package preflight

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/report"
)

// crdShape is what of a CRD the check compares: its scope, its served
// versions and its storage version.
type crdShape struct {
	scope   string
	served  []string
	storage string
}

func shapeOf(u *unstructured.Unstructured) crdShape {
	s := crdShape{}
	s.scope, _, _ = unstructured.NestedString(u.Object, "spec", "scope")
	vs, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range vs {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if served, _ := m["served"].(bool); served {
			s.served = append(s.served, name)
		}
		if st, _ := m["storage"].(bool); st {
			s.storage = name
		}
	}
	sort.Strings(s.served)
	return s
}

// checkAPIs compares the CRDs the move brings with those the target has
// of the same name: a different scope refuses every custom resource (a
// blocker); versions the source serves and the target does not are
// restored at another version, or not at all (a warning). API versions
// the target does not serve at all are the dry run's (checkDryRun).
func checkAPIs(_ context.Context, e *env) {
	update := e.o.Restore.Spec.ExistingResourcePolicy == v1alpha1.PolicyUpdate
	for _, u := range e.c.byKind["apiextensions.k8s.io/CustomResourceDefinition"] {
		tu, ok := e.t.crds[u.GetName()]
		if !ok {
			continue
		}
		s, t := shapeOf(u), shapeOf(tu)
		obj := []string{objectName("customresourcedefinitions.apiextensions.k8s.io", "", u.GetName())}
		if s.scope != t.scope {
			e.add(report.Blocker, "api", obj, fmt.Sprintf("the target's CRD is %s, the source's %s: its custom resources are refused (or land where the source's did not)", t.scope, s.scope),
				"remove the target's CRD and its resources first, or leave the kind out: spec.excludedResources "+u.GetName())
			continue
		}
		var lacking []string
		for _, v := range s.served {
			if !slices.Contains(t.served, v) {
				lacking = append(lacking, v)
			}
		}
		if len(lacking) == len(s.served) && !update {
			e.add(report.Blocker, "api", obj, fmt.Sprintf("the target's CRD serves %s, none of the source's %s: its custom resources are not restored (the target's CRD is kept: policy none)",
				strings.Join(t.served, ", "), strings.Join(s.served, ", ")), "spec.existingResourcePolicy update brings the source's CRD, or upgrade the operator in the target first")
			continue
		}
		if len(lacking) > 0 && !update {
			e.add(report.Warning, "api", obj, fmt.Sprintf("the target's CRD serves %s, not the source's %s: its custom resources are restored at a version both serve, converted, or not at all when there is none (the target's CRD is kept: policy none)",
				strings.Join(t.served, ", "), strings.Join(lacking, ", ")), "spec.existingResourcePolicy update brings the source's CRD, or upgrade the operator in the target first")
		}
		if s.storage != t.storage && len(lacking) == 0 {
			e.add(report.Note, "api", obj, fmt.Sprintf("the target's CRD stores version %s, the source's %s: objects are converted on write", t.storage, s.storage), "")
		}
	}
}

// webhook is one admission webhook, of either kind, with what the check
// needs of it.
type webhook struct {
	config, name, kind string
	fail               bool
	service            *admissionregistrationv1.ServiceReference
	rules              []admissionregistrationv1.RuleWithOperations
	namespaceSelector  *metav1.LabelSelector
	planned            bool
}

func (w webhook) resource() string {
	return w.kind + "webhookconfigurations.admissionregistration.k8s.io"
}

func (w webhook) objectName() string { return objectName(w.resource(), "", w.config) }

func webhooksOf(v []admissionregistrationv1.ValidatingWebhookConfiguration, m []admissionregistrationv1.MutatingWebhookConfiguration, planned bool) []webhook {
	var out []webhook
	for _, c := range v {
		for _, w := range c.Webhooks {
			out = append(out, webhook{config: c.Name, name: w.Name, kind: "validating", fail: w.FailurePolicy == nil || *w.FailurePolicy == admissionregistrationv1.Fail,
				service: w.ClientConfig.Service, rules: w.Rules, namespaceSelector: w.NamespaceSelector, planned: planned})
		}
	}
	for _, c := range m {
		for _, w := range c.Webhooks {
			out = append(out, webhook{config: c.Name, name: w.Name, kind: "mutating", fail: w.FailurePolicy == nil || *w.FailurePolicy == admissionregistrationv1.Fail,
				service: w.ClientConfig.Service, rules: w.Rules, namespaceSelector: w.NamespaceSelector, planned: planned})
		}
	}
	return out
}

// checkWebhooks finds admission webhooks with failurePolicy Fail whose
// backend will not answer. The target's own block the move's creates
// they intercept now (a blocker); the move's own are restored last, but
// block the pods the target's controllers then create, and every later
// create they intercept, until their backend runs (a blocker when the
// backend is in neither the backup nor the target; a warning when it is
// a planned Service whose own pods the webhook intercepts).
func checkWebhooks(_ context.Context, e *env) {
	plannedSvc := map[string]bool{}
	for _, u := range e.c.byKind["/Service"] {
		plannedSvc[u.GetNamespace()+"/"+u.GetName()] = true
	}
	targetSvc := map[string]bool{}
	for _, s := range e.t.services {
		targetSvc[s.Namespace+"/"+s.Name] = true
	}
	all := webhooksOf(e.t.validating, e.t.mutating, false)
	all = append(all, webhooksOf(objectsOf[admissionregistrationv1.ValidatingWebhookConfiguration](e.c, "admissionregistration.k8s.io/ValidatingWebhookConfiguration"),
		objectsOf[admissionregistrationv1.MutatingWebhookConfiguration](e.c, "admissionregistration.k8s.io/MutatingWebhookConfiguration"), true)...)
	targetHas := map[string]bool{}
	for _, w := range webhooksOf(e.t.validating, e.t.mutating, false) {
		targetHas[w.kind+"/"+w.config] = true
	}
	for _, w := range all {
		if !w.fail || w.service == nil || (w.planned && targetHas[w.kind+"/"+w.config]) {
			continue
		}
		svc := w.service.Namespace + "/" + w.service.Name
		switch {
		case !w.planned && e.t.endpointsReady[svc]:
			continue
		case !w.planned:
			hit, n := e.intercepted(w)
			if n == 0 {
				continue
			}
			e.add(report.Blocker, "webhook", append([]string{w.objectName()}, hit...), fmt.Sprintf("the target's %s webhook %s (failurePolicy Fail) calls Service %s, which has no ready endpoint: the target refuses every create it intercepts, %d of the move's objects (and the pods of its workloads) among them", w.kind, w.name, svc, n),
				"start the webhook's backend in the target first, or set its failurePolicy to Ignore for the move")
		case !plannedSvc[svc] && !targetSvc[svc]:
			e.add(report.Blocker, "webhook", []string{w.objectName()}, fmt.Sprintf("the move's %s webhook %s (failurePolicy Fail) calls Service %s, which is in neither the backup nor the target: once restored (last), it refuses every create it intercepts, the pods of restored workloads among them", w.kind, w.name, svc),
				"include the webhook's backend in the move (spec.includedNamespaces "+w.service.Namespace+"), or leave the webhook out: spec.excludedResources "+w.resource())
		case w.interceptsPodsOf(e, w.service.Namespace):
			e.add(report.Warning, "webhook", []string{w.objectName()}, fmt.Sprintf("the move's %s webhook %s (failurePolicy Fail) intercepts pods in %s, where its own backend %s runs: should the backend's pods be recreated while none answers, none can start", w.kind, w.name, w.service.Namespace, svc),
				"exclude the backend's namespace with the webhook's namespaceSelector, or set failurePolicy Ignore")
		}
	}
}

// intercepted lists, by group-resource and namespace, the planned
// objects whose create webhook w intercepts, and the workloads whose pods
// it intercepts, and counts them (its rules, and its namespace selector
// against the labels each namespace will have; the object selector is not
// evaluated: a selector narrows, so the count is an upper bound).
func (e *env) intercepted(w webhook) ([]string, int) {
	var out []string
	total := 0
	for gr, byNS := range e.c.byResource {
		if !w.matchesResource(gr) {
			continue
		}
		for ns, n := range byNS {
			if ns != "" && !w.matchesNamespace(e, ns) {
				continue
			}
			where := ns
			if where == "" {
				where = "(cluster)"
			}
			out = append(out, fmt.Sprintf("%s in %s (%d)", gr, where, n))
			total += n
		}
	}
	if w.matchesResource("pods") {
		// The pods that the target's controllers create for the move's
		// workloads: refused, the workloads run no pod.
		for _, wl := range e.c.workloads {
			if wl.kind != "Pod" && wl.replicas != 0 && w.matchesNamespace(e, wl.namespace) {
				out = append(out, "pods of "+wl.objectName())
				total++
			}
		}
	}
	sort.Strings(out)
	return out, total
}

func (w webhook) matchesResource(gr string) bool {
	resource, group, _ := strings.Cut(gr, ".")
	for _, r := range w.rules {
		if !slices.Contains(r.Operations, admissionregistrationv1.Create) && !slices.Contains(r.Operations, admissionregistrationv1.OperationAll) {
			continue
		}
		if (slices.Contains(r.APIGroups, "*") || slices.Contains(r.APIGroups, group)) && (slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, "*/*") || slices.Contains(r.Resources, resource)) {
			return true
		}
	}
	return false
}

func (w webhook) matchesNamespace(e *env, ns string) bool {
	if w.namespaceSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(w.namespaceSelector)
	if err != nil {
		return true
	}
	l, _ := e.namespaceLabels(ns)
	if l == nil {
		l = map[string]string{}
	}
	if _, ok := l["kubernetes.io/metadata.name"]; !ok {
		l = labels.Merge(l, map[string]string{"kubernetes.io/metadata.name": ns})
	}
	return sel.Matches(labels.Set(l))
}

func (w webhook) interceptsPodsOf(e *env, ns string) bool {
	return w.matchesResource("pods") && w.matchesNamespace(e, ns)
}

// checkAPIServices finds the move's aggregated APIServices that collide
// with the target's own of the same name (kube-prometheus's
// v1beta1.metrics.k8s.io against the target's metrics-server), and those
// whose Service is in neither the backup nor the target: their group is
// unavailable, which fails discovery and stops namespace deletion.
func checkAPIServices(_ context.Context, e *env) {
	update := e.o.Restore.Spec.ExistingResourcePolicy == v1alpha1.PolicyUpdate
	plannedSvc := map[string]bool{}
	for _, u := range e.c.byKind["/Service"] {
		plannedSvc[u.GetNamespace()+"/"+u.GetName()] = true
	}
	for _, u := range e.c.byKind["apiregistration.k8s.io/APIService"] {
		obj := []string{objectName("apiservices.apiregistration.k8s.io", "", u.GetName())}
		sns, _, _ := unstructured.NestedString(u.Object, "spec", "service", "namespace")
		sname, _, _ := unstructured.NestedString(u.Object, "spec", "service", "name")
		if sname == "" {
			continue // served by the API server itself
		}
		svc := sns + "/" + sname
		if tu, ok := e.t.apiServices[u.GetName()]; ok {
			tns, _, _ := unstructured.NestedString(tu.Object, "spec", "service", "namespace")
			tname, _, _ := unstructured.NestedString(tu.Object, "spec", "service", "name")
			if tns+"/"+tname == svc {
				continue
			}
			owner := "the API server itself"
			if tname != "" {
				owner = "Service " + tns + "/" + tname
			}
			if update {
				e.add(report.Blocker, "apiservice", obj, fmt.Sprintf("collides with the target's APIService of that name, served by %s: policy update replaces it with the source's (Service %s), taking the group from the target's own server", owner, svc),
					"leave it out (spec.excludedResources apiservices.apiregistration.k8s.io), or restore with spec.existingResourcePolicy none")
			} else {
				e.add(report.Warning, "apiservice", obj, fmt.Sprintf("collides with the target's APIService of that name, served by %s: the target's is kept, so the source's server (Service %s) is moved but does not serve the group", owner, svc),
					"nothing, if the target's server is meant to serve it; otherwise remove the target's APIService first")
			}
			continue
		}
		if !plannedSvc[svc] && !e.targetHasService(svc) {
			e.add(report.Warning, "apiservice", obj, fmt.Sprintf("its Service %s is in neither the backup nor the target: the group is unavailable, which fails discovery for clients and stops namespace deletion in the target", svc),
				"include the server in the move (spec.includedNamespaces "+sns+"), or leave the APIService out")
		}
	}
}

func (e *env) targetHasService(svc string) bool {
	for _, s := range e.t.services {
		if s.Namespace+"/"+s.Name == svc {
			return true
		}
	}
	return false
}
