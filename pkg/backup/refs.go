package backup

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
)

// references collects the cluster-scoped objects that included namespaced
// objects depend on, each with the reasons it is brought
// (docs/design.md#related-objects). With spec.includeClusterResources
// "auto" on a namespace-filtered backup only these go in. While the
// namespaced objects are listed it records the PVs of included PVCs, the
// StorageClasses of claims, PVs and StatefulSet volumeClaimTemplates
// (storageClassName or the beta annotation), the CRDs of included custom
// resources, the ClusterRoles bound by included RoleBindings, the
// PriorityClasses, RuntimeClasses and IngressClasses that workloads and
// Ingresses name, and the included ServiceAccounts and Services, which
// the follow-on references (related.go) start from.
type references struct {
	mu    sync.Mutex
	items map[schema.GroupResource]map[string]*reasons
	// serviceAccounts and services hold "namespace/name" of the included
	// ServiceAccounts and Services.
	serviceAccounts, services map[string]bool
	// saNamespaces are the namespaces with an included ServiceAccount.
	saNamespaces map[string]bool
}

// reasons are why one object is brought: at most maxReasons distinct
// texts, and how many more there were.
type reasons struct {
	texts map[string]bool
	more  int
	// version is the version the object was written at; "" until written.
	version string
}

// maxReasons bounds the reasons kept per object (a PriorityClass that
// 50,000 pods name keeps 50 of them and a count).
const maxReasons = 50

// shownReasons is how many reasons an object's result spells out.
const shownReasons = 3

// RelatedReason is the Reason of the backup results' items that record
// a related object (docs/design.md#related-objects); their Message says why.
const RelatedReason = "related"

var (
	grPV           = schema.GroupResource{Resource: "persistentvolumes"}
	grStorageClass = schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}
	grCRD          = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	grClusterRole  = schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}
	grPriority     = schema.GroupResource{Group: "scheduling.k8s.io", Resource: "priorityclasses"}
	grRuntime      = schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}
	grIngressClass = schema.GroupResource{Group: "networking.k8s.io", Resource: "ingressclasses"}
)

// betaStorageClass is the deprecated annotation a claim may name its class in.
const betaStorageClass = "volume.beta.kubernetes.io/storage-class"

// builtinGroups are groups served by kube-apiserver itself, never by CRDs.
var builtinGroups = map[string]bool{
	"": true, "apps": true, "batch": true, "autoscaling": true, "policy": true, "networking.k8s.io": true,
	"rbac.authorization.k8s.io": true, "storage.k8s.io": true, "coordination.k8s.io": true, "discovery.k8s.io": true,
	"events.k8s.io": true, "scheduling.k8s.io": true, "node.k8s.io": true, "certificates.k8s.io": true,
	"admissionregistration.k8s.io": true, "apiextensions.k8s.io": true, "apiregistration.k8s.io": true,
	"flowcontrol.apiserver.k8s.io": true, "resource.k8s.io": true, "storagemigration.k8s.io": true,
	"authentication.k8s.io": true, "authorization.k8s.io": true, "internal.apiserver.k8s.io": true,
}

func newReferences() *references {
	return &references{items: map[schema.GroupResource]map[string]*reasons{}, serviceAccounts: map[string]bool{}, services: map[string]bool{}, saNamespaces: map[string]bool{}}
}

// add records that the object gr/name is brought, and why. A reason given
// again counts once while it is among those kept.
func (r *references) add(gr schema.GroupResource, name, why string) {
	if name == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(gr, name, why)
}

func (r *references) addLocked(gr schema.GroupResource, name, why string) {
	if r.items[gr] == nil {
		r.items[gr] = map[string]*reasons{}
	}
	rs := r.items[gr][name]
	if rs == nil {
		rs = &reasons{texts: map[string]bool{}}
		r.items[gr][name] = rs
	}
	switch {
	case rs.texts[why]:
	case len(rs.texts) < maxReasons:
		rs.texts[why] = true
	default:
		rs.more++
	}
}

// names returns the names recorded for gr, sorted.
func (r *references) names(gr schema.GroupResource) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.items[gr]))
	for n := range r.items[gr] {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// writtenNames returns the names of gr's objects written.
func (r *references) writtenNames(gr schema.GroupResource) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n, rs := range r.items[gr] {
		if rs.version != "" {
			out = append(out, n)
		}
	}
	return out
}

// has reports whether gr/name is recorded.
func (r *references) has(gr schema.GroupResource, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.items[gr][name] != nil
}

// written records that gr/name went into the archive at version.
func (r *references) written(gr schema.GroupResource, name, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rs := r.items[gr][name]; rs != nil {
		rs.version = version
	}
}

// results returns one backup result per related object written, its
// reasons in the message.
func (r *references) results() []report.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []report.Result
	for gr, objs := range r.items {
		for name, rs := range objs {
			if rs.version == "" {
				continue
			}
			out = append(out, report.Result{Resource: gr.String(), Version: rs.version, Name: name, Outcome: report.BackedUp, Reason: RelatedReason, Message: rs.message()})
		}
	}
	return out
}

// message is the reasons, sorted, the first shownReasons of them spelled out.
func (rs *reasons) message() string {
	texts := make([]string, 0, len(rs.texts))
	for t := range rs.texts {
		texts = append(texts, t)
	}
	sort.Strings(texts)
	more := rs.more
	if len(texts) > shownReasons {
		more += len(texts) - shownReasons
		texts = texts[:shownReasons]
	}
	msg := strings.Join(texts, "; ")
	if more > 0 {
		msg += fmt.Sprintf(" (and %d more)", more)
	}
	return msg
}

// interesting reports whether objects of res can refer to cluster-scoped
// objects the backup must follow. A nil references follows nothing.
func (r *references) interesting(res kube.Resource) bool {
	if r == nil || !res.Namespaced {
		return false
	}
	gr := res.GroupResource()
	_, workload := kube.PodSpecPaths[gr]
	return workload || gr == "persistentvolumeclaims" || gr == "rolebindings.rbac.authorization.k8s.io" ||
		gr == "ingresses.networking.k8s.io" || !builtinGroups[res.Group]
}

// included records an included ServiceAccount or Service by name; other
// objects are ignored. A nil references records nothing.
func (r *references) included(res kube.Resource, namespace, name string) {
	if r == nil || res.Group != "" {
		return
	}
	var set map[string]bool
	switch res.GroupVersionResource.Resource {
	case "serviceaccounts":
		set = r.serviceAccounts
		r.mu.Lock()
		r.saNamespaces[namespace] = true
		r.mu.Unlock()
	case "services":
		set = r.services
	default:
		return
	}
	r.mu.Lock()
	set[namespace+"/"+name] = true
	r.mu.Unlock()
}

// includedSA and includedService report whether namespace/name is an
// included ServiceAccount or Service; includedSA with name "" whether
// any ServiceAccount of namespace is.
func (r *references) includedSA(namespace, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" {
		return r.saNamespaces[namespace]
	}
	return r.serviceAccounts[namespace+"/"+name]
}

func (r *references) includedService(namespace, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.services[namespace+"/"+name]
}

// observeRaw decodes data and records what it refers to.
func (r *references) observeRaw(res kube.Resource, data []byte) error {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return fmt.Errorf("decoding %s item: %w", res.GroupResource(), err)
	}
	r.observe(res, u)
	return nil
}

// ref is one reference an object makes.
type ref struct {
	gr        schema.GroupResource
	name, why string
}

// observe records what a namespaced object refers to.
func (r *references) observe(res kube.Resource, u *unstructured.Unstructured) {
	if !res.Namespaced {
		return
	}
	refs := objectRefs(res, u)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, rf := range refs {
		// A claim's class named twice (field and annotation) is one reason.
		if rf.name != "" && !slices.Contains(refs[:i], rf) {
			r.addLocked(rf.gr, rf.name, rf.why)
		}
	}
}

// objectRefs returns the cluster-scoped objects a namespaced object names,
// with the reason each is brought for.
func objectRefs(res kube.Resource, u *unstructured.Unstructured) []ref {
	gr := res.GroupResource()
	of := strings.ToLower(u.GetKind()) + " " + u.GetNamespace() + "/" + u.GetName()
	var refs []ref
	if path, ok := kube.PodSpecPaths[gr]; ok {
		pc, _, _ := unstructured.NestedString(u.Object, append(append([]string{}, path...), "priorityClassName")...)
		rc, _, _ := unstructured.NestedString(u.Object, append(append([]string{}, path...), "runtimeClassName")...)
		refs = append(refs, ref{grPriority, pc, "priority class of " + of}, ref{grRuntime, rc, "runtime class of " + of})
	}
	switch {
	case gr == "statefulsets.apps":
		tpls, _, _ := unstructured.NestedSlice(u.Object, "spec", "volumeClaimTemplates")
		for _, t := range tpls {
			m, _ := t.(map[string]any)
			sc, _, _ := unstructured.NestedString(m, "spec", "storageClassName")
			beta, _, _ := unstructured.NestedString(m, "metadata", "annotations", betaStorageClass)
			refs = append(refs, ref{grStorageClass, sc, "storage class of " + of}, ref{grStorageClass, beta, "storage class of " + of})
		}
	case gr == "ingresses.networking.k8s.io":
		cls, _, _ := unstructured.NestedString(u.Object, "spec", "ingressClassName")
		refs = append(refs, ref{grIngressClass, cls, "ingress class of " + of},
			ref{grIngressClass, u.GetAnnotations()["kubernetes.io/ingress.class"], "ingress class of " + of})
	case gr == "persistentvolumeclaims":
		v, _, _ := unstructured.NestedString(u.Object, "spec", "volumeName")
		sc, _, _ := unstructured.NestedString(u.Object, "spec", "storageClassName")
		refs = append(refs, ref{grPV, v, "volume of " + of}, ref{grStorageClass, sc, "storage class of " + of},
			ref{grStorageClass, u.GetAnnotations()[betaStorageClass], "storage class of " + of})
	case gr == "rolebindings.rbac.authorization.k8s.io":
		kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
		if kind == "ClusterRole" {
			refs = append(refs, ref{grClusterRole, name, "bound by " + of})
		}
	case !builtinGroups[res.Group]:
		refs = append(refs, ref{grCRD, res.GroupVersionResource.Resource + "." + res.Group, "CRD of included custom resources"})
	}
	return refs
}
