package transform

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The managedFields below are what a v1.37 API server records (dumped from
// one): a nodePort the client sent is owned by that client's field
// manager, whatever the way it was sent (create, kubectl client-side
// apply, server-side apply, a patch); one the API server allocated is
// owned by no manager, except "before-first-apply", which takes every
// field an object had when its managedFields were stripped and it was
// applied again.

// frontEnd is sock-shop's front-end Service as `kubectl apply` leaves it:
// nodePort 30001 pinned in the manifest.
const frontEnd = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"front-end","namespace":"sock-shop",
  "annotations":{"prometheus.io/scrape":"true","kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"annotations\":{\"prometheus.io/scrape\":\"true\"},\"labels\":{\"name\":\"front-end\"},\"name\":\"front-end\",\"namespace\":\"sock-shop\"},\"spec\":{\"ports\":[{\"nodePort\":30001,\"port\":80,\"targetPort\":8079}],\"selector\":{\"name\":\"front-end\"},\"type\":\"LoadBalancer\"}}\n"},
  "managedFields":[{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{},"f:prometheus.io/scrape":{}},"f:labels":{".":{},"f:name":{}}},"f:spec":{"f:allocateLoadBalancerNodePorts":{},"f:externalTrafficPolicy":{},"f:internalTrafficPolicy":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:nodePort":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:selector":{},"f:sessionAffinity":{},"f:type":{}}}}]},
  "spec":{"type":"LoadBalancer","clusterIP":"10.0.0.7","clusterIPs":["10.0.0.7"],"ports":[{"port":80,"protocol":"TCP","targetPort":8079,"nodePort":30001}],"selector":{"name":"front-end"}}}`

// allocated: created by client-go without a nodePort; a later Update by
// another manager echoed the allocated port back (which gives it no
// ownership) and the LoadBalancer got a healthCheckNodePort allocated.
const allocated = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"alloc","namespace":"a",
  "managedFields":[
   {"manager":"echo-updater","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:x":{}}}}},
   {"manager":"main","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:allocateLoadBalancerNodePorts":{},"f:externalTrafficPolicy":{},"f:internalTrafficPolicy":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:sessionAffinity":{},"f:type":{}}}}]},
  "spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","healthCheckNodePort":30888,"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080,"nodePort":31162}]}}`

// mixed: server-side apply pinned the UDP port's nodePort and the
// healthCheckNodePort; the TCP port's was allocated.
const mixed = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"dns","namespace":"a",
  "managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:healthCheckNodePort":{},"f:ports":{"k:{\"port\":53,\"protocol\":\"UDP\"}":{".":{},"f:nodePort":{},"f:port":{},"f:protocol":{}},"k:{\"port\":53,\"protocol\":\"TCP\"}":{".":{},"f:port":{},"f:protocol":{}}},"f:type":{}}}}]},
  "spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","healthCheckNodePort":30999,"ports":[{"name":"dns","port":53,"protocol":"UDP","nodePort":30053},{"name":"dnst","port":53,"protocol":"TCP","nodePort":30054}]}}`

// beforeFirstApply: managedFields stripped, then applied again: the
// allocated nodePort is owned by before-first-apply.
const beforeFirstApply = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"bfa","namespace":"a",
  "managedFields":[
   {"manager":"ssa-late","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:a":{}}}}},
   {"manager":"before-first-apply","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:clusterIP":{},"f:clusterIPs":{},"f:externalTrafficPolicy":{},"f:internalTrafficPolicy":{},"f:ipFamilies":{},"f:ipFamilyPolicy":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:nodePort":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:sessionAffinity":{},"f:type":{}}}}]},
  "spec":{"type":"NodePort","ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080,"nodePort":30931}]}}`

// nodePorts returns "port/protocol=nodePort" for each port of u, and the
// healthCheckNodePort as "hc=N".
func nodePorts(u *unstructured.Unstructured) []string {
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
	var out []string
	for _, p := range ports {
		m := p.(map[string]any)
		np, _ := m["nodePort"].(int64)
		out = append(out, fmt.Sprintf("%v/%v=%d", m["port"], m["protocol"], np))
	}
	if hc, ok, _ := unstructured.NestedInt64(u.Object, "spec", "healthCheckNodePort"); ok {
		out = append(out, fmt.Sprintf("hc=%d", hc))
	}
	return out
}

func hasNote(notes []string, want string) bool {
	return slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, want) })
}

// TestNodePortsKeptWhenClientSet: by default a restore keeps the node
// ports a client set (sock-shop's front-end pins 30001, external load
// balancers and firewall rules point at it) and clears the ones the source
// allocated, telling them apart by managedFields, and notes each decision.
func TestNodePortsKeptWhenClientSet(t *testing.T) {
	for _, tc := range []struct {
		name, js string
		want     []string
		notes    []string
	}{
		{"front-end, kubectl apply", frontEnd, []string{"80/TCP=30001"},
			[]string{`nodePort 30001 of port 80/TCP kept: set by field manager "kubectl-client-side-apply"`}},
		{"allocated", allocated, []string{"80/TCP=0"},
			[]string{"nodePort 31162 of port 80/TCP cleared: allocated by the source's API server", "healthCheckNodePort 30888 cleared: allocated by the source's API server"}},
		{"server-side apply, one port pinned", mixed, []string{"53/UDP=30053", "53/TCP=0", "hc=30999"},
			[]string{`nodePort 30053 of port 53/UDP kept: set by field manager "kubectl"`, "nodePort 30054 of port 53/TCP cleared", `healthCheckNodePort 30999 kept: set by field manager "kubectl"`}},
		{"before-first-apply owns it", beforeFirstApply, []string{"80/TCP=0"},
			[]string{"nodePort 30931 of port 80/TCP cleared"}},
	} {
		u := obj(t, tc.js)
		notes := Apply(&Context{BackupName: "b", RestoreName: "r"}, "", u)
		if got := nodePorts(u); !slices.Equal(got, tc.want) {
			t.Errorf("%s: node ports %v, want %v", tc.name, got, tc.want)
		}
		for _, n := range tc.notes {
			if !hasNote(notes, n) {
				t.Errorf("%s: no note says %q: %q", tc.name, n, notes)
			}
		}
		// --preserve-nodeports keeps every one.
		u = obj(t, tc.js)
		Apply(&Context{PreserveNodePorts: true}, "", u)
		all := obj(t, tc.js)
		if got, want := nodePorts(u), nodePorts(all); !slices.Equal(got, want) {
			t.Errorf("%s with preserveNodePorts: node ports %v, want all kept %v", tc.name, got, want)
		}
	}
}

// TestNodePortsLastApplied: without managedFields (stripped, or a Velero
// archive's copy), the kubectl.kubernetes.io/last-applied-configuration
// annotation tells which node ports the user's manifest set; with neither,
// they are cleared, saying why.
func TestNodePortsLastApplied(t *testing.T) {
	u := obj(t, frontEnd)
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	notes := Apply(&Context{}, "", u)
	if got := nodePorts(u); !slices.Equal(got, []string{"80/TCP=30001"}) {
		t.Errorf("front-end without managedFields: node ports %v, want 30001 kept from the last-applied configuration", got)
	}
	if !hasNote(notes, "nodePort 30001 of port 80/TCP kept: set in the kubectl.kubernetes.io/last-applied-configuration annotation") {
		t.Errorf("notes %q do not say where 30001 was found", notes)
	}
	// The annotation names port 80 with no protocol: TCP, as the API
	// server defaults it. A port the manifest did not pin is cleared.
	u = obj(t, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"two","namespace":"a",
	  "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"spec\":{\"type\":\"NodePort\",\"ports\":[{\"port\":80,\"nodePort\":30080},{\"port\":443}]}}"}},
	  "spec":{"type":"NodePort","ports":[{"port":80,"protocol":"TCP","nodePort":30080},{"port":443,"protocol":"TCP","nodePort":31443}]}}`)
	notes = Apply(&Context{}, "", u)
	if got := nodePorts(u); !slices.Equal(got, []string{"80/TCP=30080", "443/TCP=0"}) {
		t.Errorf("two ports: %v, want 80's kept, 443's cleared", got)
	}
	if !hasNote(notes, "nodePort 31443 of port 443/TCP cleared") {
		t.Errorf("notes %q do not say 31443 was cleared", notes)
	}
	u = obj(t, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"bare","namespace":"a"},
	  "spec":{"type":"NodePort","ports":[{"port":80,"protocol":"TCP","nodePort":30080}]}}`)
	notes = Apply(&Context{}, "", u)
	if got := nodePorts(u); !slices.Equal(got, []string{"80/TCP=0"}) {
		t.Errorf("no managedFields, no annotation: %v, want cleared", got)
	}
	if !hasNote(notes, "nodePort 30080 of port 80/TCP cleared: no managedFields or kubectl.kubernetes.io/last-applied-configuration show a client set it") {
		t.Errorf("notes %q do not say why 30080 was cleared", notes)
	}
}

// TestClearNodePorts: the restore's fallback for ports taken in the
// target clears every node port, kept ones included.
func TestClearNodePorts(t *testing.T) {
	u := obj(t, mixed)
	ClearNodePorts(u)
	if got := nodePorts(u); !slices.Equal(got, []string{"53/UDP=0", "53/TCP=0"}) {
		t.Errorf("after ClearNodePorts: %v, want none", got)
	}
}
