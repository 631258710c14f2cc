package e2e

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// client reads objects of any kind from one cluster.
type client struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newClient(t *testing.T, cfg *rest.Config) *client {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &client{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// get reads the live object of u's kind at namespace/name; nil if absent.
func (c *client) get(t *testing.T, u *unstructured.Unstructured, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	gvk := u.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("mapping %s: %v", gvk, err)
	}
	var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = c.dyn.Resource(m.Resource).Namespace(namespace)
	}
	got, err := ri.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return got
}

// content is the part of an object that a migration must carry over
// unchanged: everything but metadata (except labels and annotations) and
// status, with the documented restore transforms (docs/design.md#transforms) that are
// the same on both sides removed: Services' allocated IPs and ports, Jobs'
// generated selector and labels, controller-set annotations and ferry's
// own labels. inMapped drops a claim's volumeName (a claim in a mapped
// namespace binds to a renamed PV, checked apart). The namespace mapping
// is not applied here: sameContent applies it to the source side only
// (mapSourceNamespaces), so a reference ferry forgot to map differs.
func content(u *unstructured.Unstructured, inMapped bool) map[string]any {
	o := u.DeepCopy().Object
	md, _ := o["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	delete(o, "metadata")
	delete(o, "status")
	for k := range labels {
		if strings.HasPrefix(k, "ferry.dev/") {
			delete(labels, k)
		}
	}
	delete(ann, "deployment.kubernetes.io/revision")
	// The PV controller's binding bookkeeping: the target's controller
	// binds the restored pair again and writes its own.
	for _, k := range []string{"pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller"} {
		delete(ann, k)
	}
	// autoscaling/v1 renders an HPA's status as these annotations.
	delete(ann, "autoscaling.alpha.kubernetes.io/conditions")
	delete(ann, "autoscaling.alpha.kubernetes.io/current-metrics")
	switch u.GetKind() {
	case "Service":
		unstructured.RemoveNestedField(o, "spec", "clusterIP")
		unstructured.RemoveNestedField(o, "spec", "clusterIPs")
		unstructured.RemoveNestedField(o, "spec", "healthCheckNodePort")
		ports, _, _ := unstructured.NestedSlice(o, "spec", "ports")
		for _, p := range ports {
			delete(p.(map[string]any), "nodePort")
		}
		_ = unstructured.SetNestedSlice(o, ports, "spec", "ports")
	case "Job":
		unstructured.RemoveNestedField(o, "spec", "selector")
		for _, k := range []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"} {
			delete(labels, k)
			unstructured.RemoveNestedField(o, "spec", "template", "metadata", "labels", k)
		}
	case "ClusterRole":
		if _, ok := o["aggregationRule"]; ok {
			delete(o, "rules") // computed by the clusterrole-aggregation controller
		}
	case "CertificateSigningRequest":
		// The API server sets the requester from the caller.
		for _, f := range []string{"username", "uid", "groups", "extra"} {
			unstructured.RemoveNestedField(o, "spec", f)
		}
	case "PersistentVolume":
		// The target's PV controller binds by name; the source's claim UID is meaningless there.
		unstructured.RemoveNestedField(o, "spec", "claimRef", "uid")
		unstructured.RemoveNestedField(o, "spec", "claimRef", "resourceVersion")
	case "PersistentVolumeClaim":
		if inMapped {
			unstructured.RemoveNestedField(o, "spec", "volumeName")
		}
	}
	if len(labels) > 0 {
		o["labels"] = labels
	}
	if len(ann) > 0 {
		o["annotations"] = ann
	}
	// Round-trip through JSON so that number types agree.
	b, _ := json.Marshal(o)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// mapSourceNamespaces applies the namespace mapping to the namespace
// references in a source object's content c (of kind): what ferry must
// have written to the target. The target's content is compared raw.
func mapSourceNamespaces(c map[string]any, kind string, nsMap map[string]string) {
	mapNS := func(ns string) string {
		if t, ok := nsMap[ns]; ok {
			return t
		}
		return ns
	}
	switch kind {
	case "PersistentVolume":
		if ns, ok, _ := unstructured.NestedString(c, "spec", "claimRef", "namespace"); ok {
			_ = unstructured.SetNestedField(c, mapNS(ns), "spec", "claimRef", "namespace")
		}
	case "Namespace":
		if labels, ok := c["labels"].(map[string]any); ok {
			if v, ok := labels["kubernetes.io/metadata.name"].(string); ok {
				labels["kubernetes.io/metadata.name"] = mapNS(v)
			}
		}
	case "RoleBinding", "ClusterRoleBinding":
		subjects, _ := c["subjects"].([]any)
		for _, s := range subjects {
			if m, ok := s.(map[string]any); ok {
				if ns, ok := m["namespace"].(string); ok {
					m["namespace"] = mapNS(ns)
				}
			}
		}
	}
}

// sameContent compares source and target content, returning a short
// diff. The namespace mapping is applied to the source side only.
func sameContent(src, dst *unstructured.Unstructured, nsMap map[string]string) (bool, string) {
	inMapped := isMapped(nsMap, src.GetNamespace())
	a, b := content(src, inMapped), content(dst, inMapped)
	mapSourceNamespaces(a, src.GetKind(), nsMap)
	if reflect.DeepEqual(a, b) {
		return true, ""
	}
	for k := range a {
		if !reflect.DeepEqual(a[k], b[k]) {
			sa, _ := json.Marshal(a[k])
			sb, _ := json.Marshal(b[k])
			return false, k + ": source " + trunc(string(sa)) + " target " + trunc(string(sb))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			sb, _ := json.Marshal(b[k])
			return false, k + ": only in target: " + trunc(string(sb))
		}
	}
	return false, "differs"
}

func trunc(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// isMapped reports whether ns is a source or a target of the mapping.
func isMapped(nsMap map[string]string, ns string) bool {
	for k, v := range nsMap {
		if ns == k || ns == v {
			return true
		}
	}
	return false
}
