package kube

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Resource is one served API resource at one version.
type Resource struct {
	schema.GroupVersionResource
	Kind       string
	Namespaced bool
	Verbs      []string
}

// GroupResource returns "resource.group" ("deployments.apps"), or the bare
// resource for the core group.
func (r Resource) GroupResource() string {
	if r.Group == "" {
		return r.GroupVersionResource.Resource
	}
	return r.GroupVersionResource.Resource + "." + r.Group
}

// Has reports whether the resource supports verb.
func (r Resource) Has(verb string) bool { return slices.Contains(r.Verbs, verb) }

// APIs is what a cluster serves: every resource at every served version,
// and the preferred version of each group (the API server's own choice,
// from /apis discovery).
type APIs struct {
	// Preferred maps group ("" for core) to its preferred version.
	Preferred map[string]string
	// Served maps group to every served version, preferred first.
	Served map[string][]string
	// byGVR indexes resources (subresources excluded).
	byGVR map[schema.GroupVersionResource]Resource
	// Failed lists groups whose discovery failed (aggregated APIs that are down).
	Failed map[string]error
}

// Discover reads the cluster's groups and resources. A group whose
// discovery fails (an aggregated API server that is down) is recorded in
// Failed rather than failing the whole discovery.
func Discover(d discovery.DiscoveryInterface) (*APIs, error) {
	groups, lists, err := d.ServerGroupsAndResources()
	apis := &APIs{Preferred: map[string]string{}, Served: map[string][]string{}, byGVR: map[schema.GroupVersionResource]Resource{}, Failed: map[string]error{}}
	if err != nil {
		var gdf *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &gdf) {
			return nil, fmt.Errorf("discovering API resources: %w", err)
		}
		for gv, e := range gdf.Groups {
			apis.Failed[gv.String()] = e
		}
	}
	for _, g := range groups {
		apis.Preferred[g.Name] = g.PreferredVersion.Version
		for _, v := range g.Versions {
			apis.Served[g.Name] = append(apis.Served[g.Name], v.Version)
		}
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			res := Resource{GroupVersionResource: gv.WithResource(r.Name), Kind: r.Kind, Namespaced: r.Namespaced, Verbs: []string(r.Verbs)}
			apis.byGVR[res.GroupVersionResource] = res
		}
	}
	return apis, nil
}

// Lookup returns the resource at gvr, if served.
func (a *APIs) Lookup(gvr schema.GroupVersionResource) (Resource, bool) {
	r, ok := a.byGVR[gvr]
	return r, ok
}

// PreferredResources returns every resource once, sorted by
// group-resource, at its group's preferred version; a resource the
// preferred version does not have (a group whose versions differ in their
// resources) comes at its first served version in discovery order, which
// the API server sorts by version priority.
func (a *APIs) PreferredResources() []Resource {
	seen := map[schema.GroupResource]bool{}
	var out []Resource
	for gvr := range a.byGVR {
		gr := gvr.GroupResource()
		if seen[gr] {
			continue
		}
		seen[gr] = true
		if v := a.Versions(gr.Group, gr.Resource); len(v) > 0 {
			out = append(out, a.byGVR[gr.WithVersion(v[0])])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupResource() < out[j].GroupResource() })
	return out
}

// OtherVersions returns r's group-resource at every other served version,
// in discovery order (version priority): what a backup of all versions
// stores besides r itself.
func (a *APIs) OtherVersions(r Resource) []Resource {
	var out []Resource
	for _, v := range a.Versions(r.Group, r.GroupVersionResource.Resource) {
		if v != r.Version {
			out = append(out, a.byGVR[schema.GroupResource{Group: r.Group, Resource: r.GroupVersionResource.Resource}.WithVersion(v)])
		}
	}
	return out
}

// Versions returns the served versions of group-resource gr, preferred first.
func (a *APIs) Versions(group, resource string) []string {
	var out []string
	for _, v := range a.Served[group] {
		if _, ok := a.byGVR[schema.GroupVersionResource{Group: group, Version: v, Resource: resource}]; ok {
			out = append(out, v)
		}
	}
	return out
}

// FindKind returns the served resource for group and kind at version, if any.
func (a *APIs) FindKind(gv schema.GroupVersion, kind string) (Resource, bool) {
	for gvr, r := range a.byGVR {
		if gvr.GroupVersion() == gv && r.Kind == kind {
			return r, true
		}
	}
	return Resource{}, false
}
