package backup

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeferry/ferry/pkg/filter"
	"github.com/kubeferry/ferry/pkg/kube"
)

// neverBackedUp lists group-resources that are not objects a restore can
// use: componentstatuses is a health probe, not stored state.
var neverBackedUp = map[string]bool{
	"componentstatuses": true,
}

// servedTwice maps a resource that the API server serves under two groups,
// from one storage, to the group-resource it is backed up under: the same
// objects would be in the archive twice otherwise. Core events are
// events.k8s.io's Events at their legacy group; events.k8s.io/v1 is the
// API the Kubernetes project keeps developing (Velero calls these
// cohabitating resources).
var servedTwice = map[schema.GroupResource]schema.GroupResource{
	{Resource: "events"}: {Group: "events.k8s.io", Resource: "events"},
}

// selection is the set of resources one backup lists.
type selection struct {
	namespaced []kube.Resource
	cluster    []kube.Resource
	// clusterAll is true when every selected cluster-scoped resource is
	// listed whole; false when only objects referenced by namespaced items
	// (and the Namespaces themselves) go in ("auto" on a namespace-filtered backup).
	clusterAll bool
	// clusterNone is true for spec.includeClusterResources "false".
	clusterNone bool
	// other marks the entries of namespaced and cluster that are a
	// resource at a version other than its preferred one.
	other map[schema.GroupVersionResource]bool
}

// selectResources applies the resource filter and the cluster-scope rule
// (spec.includeClusterResources: auto, true or false) to what the cluster serves
// at its preferred versions, and unless preferredOnly at every other served
// version too. Only resources that support list and get are selected.
func selectResources(apis *kube.APIs, res *filter.Resources, ns *filter.Namespaces, includeCluster string, preferredOnly bool) selection {
	sel := selection{other: map[schema.GroupVersionResource]bool{}}
	switch includeCluster {
	case "true":
		sel.clusterAll = true
	case "false":
		sel.clusterNone = true
	default: // auto
		sel.clusterAll = ns.All()
	}
	selectable := func(r kube.Resource) bool {
		return r.Has("list") && r.Has("get") && !neverBackedUp[r.GroupResource()] && res.Match(r.Group, r.GroupVersionResource.Resource, r.Kind)
	}
	for _, r := range apis.PreferredResources() {
		if !selectable(r) || twinSelected(apis, r, selectable) {
			continue
		}
		versions := []kube.Resource{r}
		if !preferredOnly {
			for _, o := range apis.OtherVersions(r) {
				if o.Has("list") && o.Has("get") {
					versions = append(versions, o)
					sel.other[o.GroupVersionResource] = true
				}
			}
		}
		if r.Namespaced {
			sel.namespaced = append(sel.namespaced, versions...)
		} else {
			sel.cluster = append(sel.cluster, versions...)
		}
	}
	return sel
}

// twinSelected reports whether r is served under another group too
// (servedTwice) and is selected there.
func twinSelected(apis *kube.APIs, r kube.Resource, selectable func(kube.Resource) bool) bool {
	twin, ok := servedTwice[r.GroupVersionResource.GroupResource()]
	if !ok {
		return false
	}
	versions := apis.Versions(twin.Group, twin.Resource)
	if len(versions) == 0 {
		return false
	}
	t, _ := apis.Lookup(twin.WithVersion(versions[0]))
	return selectable(t)
}

// unmatchedIncludes returns the spec.includedResources entries that match no
// served resource (a typo gives an empty backup otherwise).
func unmatchedIncludes(apis *kube.APIs, include []string) []string {
	var out []string
	for _, inc := range include {
		if inc == "*" {
			continue
		}
		one := filter.NewResources([]string{inc}, nil)
		found := false
		for _, r := range apis.PreferredResources() {
			if one.Match(r.Group, r.GroupVersionResource.Resource, r.Kind) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, inc)
		}
	}
	return out
}
