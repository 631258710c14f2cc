package backup

import (
	"context"
	"fmt"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeferry/ferry/pkg/filter"
	"github.com/kubeferry/ferry/pkg/kube"
)

// references collects the cluster-scoped objects that included namespaced
// objects depend on. With spec.includeClusterResources "auto" on a
// namespace-filtered backup only these go in (issue 2): the PVs of
// included PVCs, the StorageClasses of claims, PVs and StatefulSet
// volumeClaimTemplates (storageClassName or the beta annotation), the CRDs
// of included custom resources, the ClusterRoles bound by included
// RoleBindings, and the PriorityClasses, RuntimeClasses and IngressClasses
// that workloads and Ingresses name: without them the restored workloads
// would not start.
type references struct {
	mu    sync.Mutex
	items map[schema.GroupResource]map[string]bool
}

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
	return &references{items: map[schema.GroupResource]map[string]bool{}}
}

func (r *references) add(gr schema.GroupResource, name string) {
	if name == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.items[gr] == nil {
		r.items[gr] = map[string]bool{}
	}
	r.items[gr][name] = true
}

// interesting reports whether objects of res can refer to cluster-scoped
// objects the backup must follow.
func (r *references) interesting(res kube.Resource) bool {
	if !res.Namespaced {
		return false
	}
	gr := res.GroupResource()
	_, workload := kube.PodSpecPaths[gr]
	return workload || gr == "persistentvolumeclaims" || gr == "rolebindings.rbac.authorization.k8s.io" ||
		gr == "ingresses.networking.k8s.io" || !builtinGroups[res.Group]
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

// observe records what a namespaced object refers to.
func (r *references) observe(res kube.Resource, u *unstructured.Unstructured) {
	if !res.Namespaced {
		return
	}
	gr := res.GroupResource()
	if path, ok := kube.PodSpecPaths[gr]; ok {
		pc, _, _ := unstructured.NestedString(u.Object, append(append([]string{}, path...), "priorityClassName")...)
		r.add(grPriority, pc)
		rc, _, _ := unstructured.NestedString(u.Object, append(append([]string{}, path...), "runtimeClassName")...)
		r.add(grRuntime, rc)
	}
	switch {
	case gr == "statefulsets.apps":
		tpls, _, _ := unstructured.NestedSlice(u.Object, "spec", "volumeClaimTemplates")
		for _, t := range tpls {
			m, _ := t.(map[string]any)
			sc, _, _ := unstructured.NestedString(m, "spec", "storageClassName")
			r.add(grStorageClass, sc)
			beta, _, _ := unstructured.NestedString(m, "metadata", "annotations", betaStorageClass)
			r.add(grStorageClass, beta)
		}
	case gr == "ingresses.networking.k8s.io":
		cls, _, _ := unstructured.NestedString(u.Object, "spec", "ingressClassName")
		r.add(grIngressClass, cls)
		r.add(grIngressClass, u.GetAnnotations()["kubernetes.io/ingress.class"])
	case res.Group == "" && res.GroupVersionResource.Resource == "persistentvolumeclaims":
		v, _, _ := unstructured.NestedString(u.Object, "spec", "volumeName")
		r.add(grPV, v)
		sc, _, _ := unstructured.NestedString(u.Object, "spec", "storageClassName")
		r.add(grStorageClass, sc)
		r.add(grStorageClass, u.GetAnnotations()[betaStorageClass])
	case res.Group == "rbac.authorization.k8s.io" && res.GroupVersionResource.Resource == "rolebindings":
		kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
		if kind == "ClusterRole" {
			r.add(grClusterRole, name)
		}
	case !builtinGroups[res.Group]:
		r.add(grCRD, res.GroupVersionResource.Resource+"."+res.Group)
	}
}

// writeReferenced GETs and writes the referenced cluster-scoped objects,
// PVs first so that their StorageClasses are known too. Objects that are
// gone, or not CRD-backed, are skipped; resources excluded by the
// resource filter are not added.
func (r *run) writeReferenced(ctx context.Context, apis *kube.APIs, res *filter.Resources) error {
	for _, gr := range []schema.GroupResource{grPV, grStorageClass, grCRD, grClusterRole, grPriority, grRuntime, grIngressClass} {
		versions := apis.Versions(gr.Group, gr.Resource)
		if len(versions) == 0 {
			continue
		}
		kr, _ := apis.Lookup(gr.WithVersion(apis.Preferred[gr.Group]))
		if kr.Kind == "" {
			kr, _ = apis.Lookup(gr.WithVersion(versions[0]))
		}
		if !res.Match(kr.Group, kr.GroupVersionResource.Resource, kr.Kind) {
			continue
		}
		r.refs.mu.Lock()
		names := make([]string, 0, len(r.refs.items[gr]))
		for n := range r.refs.items[gr] {
			names = append(names, n)
		}
		r.refs.mu.Unlock()
		sort.Strings(names)
		for _, n := range names {
			u, err := r.cluster.Dynamic.Resource(kr.GroupVersionResource).Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				if gr != grCRD { // a group-resource that is not CRD-backed (aggregated API) has no CRD
					r.results.Warnf("%s %s is referenced by a backed-up object but does not exist", kr.GroupResource(), n)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("getting %s %s: %w", kr.GroupResource(), n, err)
			}
			r.total.Add(1)
			if gr == grPV {
				sc, _, _ := unstructured.NestedString(u.Object, "spec", "storageClassName")
				r.refs.add(grStorageClass, sc)
			}
			if err := r.writeObject(kr, u); err != nil {
				return err
			}
		}
	}
	return nil
}
