package transform

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// lastAppliedAnnotation is where `kubectl apply` (client-side) keeps the
// manifest it last applied.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// beforeFirstApplyManager is the field manager the API server gives every
// field an object has when it is applied while it has no managedFields:
// fields it allocated included, so it says nothing about who set them.
const beforeFirstApplyManager = "before-first-apply"

// NodePorts keeps the nodePorts and the healthCheckNodePort of a Service
// that a client set (a manifest that pins nodePort: 30001) and clears the
// ones the source's API server allocated, so that the target allocates
// its own; with PreserveNodePorts it keeps them all. It runs before
// Sanitize, which drops the managedFields it reads
// (docs/design.md#services). Each decision is noted.
func NodePorts(c *Context, u *unstructured.Unstructured) []string {
	if c.PreserveNodePorts {
		return nil
	}
	w := newPortSetters(u)
	var notes []string
	if hc, ok, _ := unstructured.NestedInt64(u.Object, "spec", "healthCheckNodePort"); ok && hc != 0 {
		by, why := w.setBy(fieldpath.MakePathOrDie("spec", "healthCheckNodePort"), w.lastAppliedHas("healthCheckNodePort"))
		if by == "" {
			unstructured.RemoveNestedField(u.Object, "spec", "healthCheckNodePort")
			notes = append(notes, fmt.Sprintf("healthCheckNodePort %d cleared: %s; the target allocates one", hc, why))
		} else {
			notes = append(notes, fmt.Sprintf("healthCheckNodePort %d kept: set %s", hc, by))
		}
	}
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
	changed := false
	for _, p := range ports {
		m, _ := p.(map[string]any)
		np, ok := m["nodePort"]
		if !ok {
			continue
		}
		port, proto := portKey(m)
		path := fieldpath.MakePathOrDie("spec", "ports", fieldpath.KeyByFields("port", port, "protocol", proto), "nodePort")
		by, why := w.setBy(path, w.lastAppliedPortHas(port, proto))
		if by != "" {
			notes = append(notes, fmt.Sprintf("nodePort %v of port %d/%s kept: set %s", np, port, proto, by))
			continue
		}
		delete(m, "nodePort")
		changed = true
		notes = append(notes, fmt.Sprintf("nodePort %v of port %d/%s cleared: %s; the target allocates one", np, port, proto, why))
	}
	if changed {
		_ = unstructured.SetNestedSlice(u.Object, ports, "spec", "ports")
	}
	return notes
}

// ClearNodePorts removes every nodePort and the healthCheckNodePort; the
// restore uses it to retry a Service whose kept ports are taken.
func ClearNodePorts(u *unstructured.Unstructured) {
	unstructured.RemoveNestedField(u.Object, "spec", "healthCheckNodePort")
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
	for _, p := range ports {
		if m, ok := p.(map[string]any); ok {
			delete(m, "nodePort")
		}
	}
	if len(ports) > 0 {
		_ = unstructured.SetNestedSlice(u.Object, ports, "spec", "ports")
	}
}

// portKey is a service port's key in managedFields: port and protocol
// (TCP when unset, as the API server defaults it).
func portKey(m map[string]any) (int64, string) {
	var port int64
	switch n := m["port"].(type) {
	case int64:
		port = n
	case float64:
		port = int64(n)
	}
	proto, _ := m["protocol"].(string)
	if proto == "" {
		proto = "TCP"
	}
	return port, proto
}

// portSetters tells who set a field of a Service: its managedFields (one
// field set per manager) and its last-applied configuration.
type portSetters struct {
	managers    []managedSet
	lastApplied map[string]any
}

type managedSet struct {
	manager string
	fields  *fieldpath.Set
}

func newPortSetters(u *unstructured.Unstructured) *portSetters {
	w := &portSetters{}
	for _, e := range u.GetManagedFields() {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
			continue
		}
		w.managers = append(w.managers, managedSet{e.Manager, s})
	}
	if la := u.GetAnnotations()[lastAppliedAnnotation]; la != "" {
		_ = json.Unmarshal([]byte(la), &w.lastApplied)
	}
	return w
}

// setBy returns who set the field at path ("by field manager ..." or "in
// the ... annotation"), or "" and why it counts as allocated: no field
// manager owns it (before-first-apply does not count) and the last-applied
// configuration does not set it (inLastApplied).
func (w *portSetters) setBy(path fieldpath.Path, inLastApplied bool) (by, why string) {
	bfa := false
	for _, m := range w.managers {
		if !m.fields.Has(path) {
			continue
		}
		if m.manager == beforeFirstApplyManager {
			bfa = true
			continue
		}
		return fmt.Sprintf("by field manager %q", m.manager), ""
	}
	if inLastApplied {
		return "in the " + lastAppliedAnnotation + " annotation", ""
	}
	switch {
	case bfa:
		return "", "only " + beforeFirstApplyManager + " owns it (managedFields were rebuilt) and no " + lastAppliedAnnotation + " sets it"
	case len(w.managers) > 0:
		return "", "allocated by the source's API server (no field manager set it)"
	}
	return "", "no managedFields or " + lastAppliedAnnotation + " show a client set it"
}

// lastAppliedHas reports whether the last-applied configuration sets spec.<field>.
func (w *portSetters) lastAppliedHas(field string) bool {
	v, ok, _ := unstructured.NestedFieldNoCopy(w.lastApplied, "spec", field)
	return ok && v != nil
}

// lastAppliedPortHas reports whether the last-applied configuration sets
// the nodePort of the port with this port number and protocol.
func (w *portSetters) lastAppliedPortHas(port int64, proto string) bool {
	ports, _, _ := unstructured.NestedSlice(w.lastApplied, "spec", "ports")
	for _, p := range ports {
		m, _ := p.(map[string]any)
		if m == nil || m["nodePort"] == nil {
			continue
		}
		if pn, pp := portKey(m); pn == port && pp == proto {
			return true
		}
	}
	return false
}
