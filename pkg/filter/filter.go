// Package filter matches namespaces and resources against the include and
// exclude lists of a backup or restore spec.
//
// Namespace patterns are globs in path.Match syntax ("team-*", "app?").
// Resource entries may be a resource name ("deployments"), a
// group-resource ("deployments.apps"), a kind ("Deployment", any case),
// or "*". Rules follow Velero's: an empty include list includes all,
// and exclusion wins over inclusion.
package filter

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Namespaces matches namespace names.
type Namespaces struct {
	include, exclude []string
}

// NewNamespaces validates the glob patterns and returns a matcher. An
// entry given twice counts once.
func NewNamespaces(include, exclude []string) (*Namespaces, error) {
	for _, p := range append(append([]string{}, include...), exclude...) {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("namespace pattern %q: %w", p, err)
		}
		if p == "" || strings.ContainsAny(p, "/ ") {
			return nil, fmt.Errorf("namespace pattern %q: not a namespace name or glob", p)
		}
	}
	return &Namespaces{include: unique(include), exclude: unique(exclude)}, nil
}

// unique returns in without repeated entries, in their first order.
func unique(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// All reports whether the include list selects every namespace.
func (n *Namespaces) All() bool {
	if len(n.include) == 0 {
		return true
	}
	for _, p := range n.include {
		if p == "*" {
			return true
		}
	}
	return false
}

// Literal returns the included namespaces when every include entry is a
// plain name (no glob characters), so callers can list per namespace.
func (n *Namespaces) Literal() ([]string, bool) {
	if n.All() {
		return nil, false
	}
	for _, p := range n.include {
		if strings.ContainsAny(p, "*?[\\") {
			return nil, false
		}
	}
	return n.include, true
}

// Match reports whether namespace ns is selected.
func (n *Namespaces) Match(ns string) bool {
	for _, p := range n.exclude {
		if ok, _ := path.Match(p, ns); ok {
			return false
		}
	}
	if len(n.include) == 0 {
		return true
	}
	for _, p := range n.include {
		if ok, _ := path.Match(p, ns); ok {
			return true
		}
	}
	return false
}

// Resources matches API resources.
type Resources struct {
	include, exclude []string
}

// NewResources returns a resource matcher.
func NewResources(include, exclude []string) *Resources {
	return &Resources{include: lower(include), exclude: lower(exclude)}
}

func lower(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s = strings.TrimSpace(strings.ToLower(s)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func matchOne(p, group, resource, kind string) bool {
	if p == "*" {
		return true
	}
	gr := resource
	if group != "" {
		gr = resource + "." + group
	}
	return p == resource || p == gr || p == strings.ToLower(kind) || (group != "" && p == strings.ToLower(kind)+"."+group)
}

// Match reports whether the resource (group "" for core) is selected.
func (r *Resources) Match(group, resource, kind string) bool {
	for _, p := range r.exclude {
		if matchOne(p, group, resource, kind) {
			return false
		}
	}
	if len(r.include) == 0 {
		return true
	}
	for _, p := range r.include {
		if matchOne(p, group, resource, kind) {
			return true
		}
	}
	return false
}

// Explicit reports whether the resource is named in the include list
// (not just matched by "*" or an empty list).
func (r *Resources) Explicit(group, resource, kind string) bool {
	for _, p := range r.include {
		if p != "*" && matchOne(p, group, resource, kind) {
			return true
		}
	}
	return false
}
