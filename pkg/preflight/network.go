package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/transform"
)

// targetCloud is the cloud the target runs on: the restore's
// spec.toCloud, else the cloud whose node labels its nodes carry ("" when
// neither says).
func (e *env) targetCloud() string {
	if c := e.o.Restore.Spec.ToCloud; c != "" {
		return c
	}
	for _, n := range e.t.nodes {
		if c := transform.CloudOfNodeLabels(n.Labels); c != "" {
			return c
		}
	}
	return ""
}

// checkServices finds what of the move's Services is tied to the old
// cloud or clashes in the target: a pinned spec.loadBalancerIP (an
// address of the old cloud's network: the target's load balancer does not
// get it), load-balancer annotations of another cloud (the target's
// controller ignores them), and node ports the target's Services hold
// already (the target allocates others, and clients of the old port
// break).
func checkServices(_ context.Context, e *env) {
	cloud := e.targetCloud()
	taken := map[int32]string{}
	for _, s := range e.t.services {
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				taken[p.NodePort] = s.Namespace + "/" + s.Name
			}
		}
	}
	var g groups
	for _, s := range objectsOf[corev1.Service](e.c, "/Service") {
		obj := objectName("services", s.Namespace, s.Name)
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.LoadBalancerIP != "" {
			e.add(report.Warning, "service", []string{obj}, fmt.Sprintf("pins spec.loadBalancerIP %s, an address of the old cloud's network: the target's load balancer cannot take it, and the Service stays without an address (or its controller reports an error)", s.Spec.LoadBalancerIP),
				`a resource modifier that removes /spec/loadBalancerIP (or sets an address reserved in the target)`)
		}
		clouds := map[string][]string{}
		for k := range s.Annotations {
			if c := transform.CloudOfServiceAnnotation(k); c != "" && c != cloud {
				clouds[c] = append(clouds[c], k)
			}
		}
		for c, keys := range clouds {
			sort.Strings(keys)
			what := fmt.Sprintf("load-balancer annotations of %s (%s)", c, strings.Join(keys, ", "))
			if cloud != "" {
				g.add(report.Warning, what+" on a target that runs on "+cloud+": its load-balancer controller ignores them (an internal load balancer becomes public)",
					fmt.Sprintf("spec.fromCloud %s, spec.toCloud %s translates them", c, cloud), obj)
			} else {
				g.add(report.Note, what+": the target's cloud is not known (no cloud's node labels), so they may be ignored there",
					fmt.Sprintf("spec.fromCloud %s, spec.toCloud CLOUD translates them", c), obj)
			}
		}
		for _, p := range s.Spec.Ports {
			if other, ok := taken[p.NodePort]; ok && p.NodePort != 0 && other != s.Namespace+"/"+s.Name {
				what := fmt.Sprintf("node port %d is taken in the target by Service %s: the target allocates another, and clients of port %d break", p.NodePort, other, p.NodePort)
				fix := "free the port in the target, or accept a new one"
				if e.o.Restore.Spec.PreserveNodePorts {
					fix = "free the port in the target first: spec.preserveNodePorts keeps the source's ports, and this one is taken"
				}
				e.add(report.Warning, "service", []string{obj}, what, fix)
			}
		}
	}
	g.flush(e, "service")
}

// checkIngresses finds the move's Ingresses whose class the target has
// not (nor does the move bring it): no controller serves them, and they
// get no address. An Ingress without a class needs a default IngressClass
// in the target.
func checkIngresses(_ context.Context, e *env) {
	classes := map[string]bool{}
	def := false
	for n, c := range e.t.ingressClasses {
		classes[n] = true
		def = def || c.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true"
	}
	for _, c := range objectsOf[networkingv1.IngressClass](e.c, "networking.k8s.io/IngressClass") {
		classes[c.Name] = true
		def = def || c.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true"
	}
	names := make([]string, 0, len(classes))
	for n := range classes {
		names = append(names, n)
	}
	sort.Strings(names)
	has := "the target has no IngressClass"
	if len(names) > 0 {
		has = "the target has " + strings.Join(names, ", ")
	}
	var g groups
	for _, ing := range objectsOf[networkingv1.Ingress](e.c, "networking.k8s.io/Ingress") {
		obj := objectName("ingresses.networking.k8s.io", ing.Namespace, ing.Name)
		class := ing.Annotations["kubernetes.io/ingress.class"]
		if ing.Spec.IngressClassName != nil {
			class = *ing.Spec.IngressClassName
		}
		switch {
		case class == "" && !def:
			g.add(report.Warning, "names no ingress class, and the target has no default IngressClass: no controller serves it, and it gets no address",
				"set spec.ingressClassName with spec.resourceModifiers ("+has+")", obj)
		case class != "" && !classes[class]:
			g.add(report.Warning, fmt.Sprintf("ingress class %s does not exist in the target: no controller serves it, and it gets no address", class),
				"spec.toCloud sets the cloud's class, or change spec.ingressClassName with spec.resourceModifiers ("+has+")", obj)
		}
	}
	g.flush(e, "ingress")
}
