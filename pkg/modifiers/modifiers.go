// Package modifiers applies user rules that change objects during a restore
// ("resource modifiers"). A rules file uses the YAML format of Velero's
// restore resource modifiers, with the same field names, so that a file
// written for Velero works here as it is:
// https://velero.io/docs/main/restore-resource-modifiers/
//
// A file has this shape:
//
//	version: v1                        # the only version; case-insensitive
//	resourceModifierRules:             # at least one rule; applied in order
//	- conditions:
//	    groupResource: deployments.apps  # required: "resource" (core group) or
//	                                     # "resource.group"; a glob, see below
//	    resourceNameRegex: "^web-.*$"    # optional Go regexp, unanchored
//	    namespaces: [bar, "team-*"]      # optional globs; empty or "*" = all
//	    labelSelector:                   # optional metav1.LabelSelector
//	      matchLabels: {app: web}
//	    matches:                         # optional; every entry must hold
//	    - path: /spec/replicas           # JSON pointer (RFC 6901)
//	      value: "3"                     # compared as JSON, see Values
//	  patches:                           # RFC 6902 JSON Patch operations
//	  - operation: replace               # add remove replace move copy test
//	    path: /spec/replicas
//	    value: "1"
//	  - operation: copy                  # move and copy also need "from"
//	    from: /metadata/labels/app
//	    path: /metadata/labels/origin
//	  mergePatches:                      # RFC 7386 JSON Merge Patch
//	  - patchData: |                     # a JSON or YAML object
//	      {"metadata": {"annotations": {"foo": null}}}
//	  strategicPatches:                  # Kubernetes strategic merge patch
//	  - patchData: |
//	      spec:
//	        template:
//	          spec:
//	            containers:
//	            - name: nginx
//	              image: repo2/nginx
//
// # Conditions
//
// A rule applies to an object when all of its conditions hold:
//
//   - groupResource matches the resource the caller names ("pods",
//     "deployments.apps"), as a glob in which "*" and "?" stop at dots:
//     "*.apps" is every resource of the apps group, "*" every resource of
//     the core group and "*.*" every resource of any group. "**",
//     "[abc]", "[!abc]", "[a-z]", "{a,b}" and "\" escapes work as in
//     Velero (which uses github.com/gobwas/glob).
//   - namespaces (globs) lists the object's namespace. Cluster-scoped
//     objects pass this condition whatever it lists, as in Velero.
//   - resourceNameRegex matches the object's name somewhere (anchor it
//     with ^ and $ for a whole-name match).
//   - labelSelector selects the object's labels.
//   - every matches entry holds: the value at its path equals its value.
//     A path that is not in the object does not match.
//
// Conditions are evaluated on the object as it was passed to Apply, before
// any rule changed it, as Velero does; patches, on the other hand, see the
// changes of the rules before them.
//
// # Patches
//
// A matching rule applies its JSON patches, then its merge patches, then
// its strategic patches, each list in order, to the result of the previous
// one. A strategic merge patch needs the Go type of the object's kind; for
// kinds that client-go's scheme does not know (custom resources) it is
// applied as a JSON merge patch instead, and the rule's note says so.
// Patching is done by github.com/evanphx/json-patch/v5 and
// k8s.io/apimachinery/pkg/util/strategicpatch.
//
// A "test" operation that fails makes its rule a conditional one, as
// Velero documents: the rule is skipped (none of its patches applies), no
// error is returned, and a note says which test did not hold. A test whose
// path is missing fails the same way.
//
// # Values
//
// A value ("value" of a JSON patch or of a matches entry) is read as Velero
// reads it. A YAML string is converted: "" is the empty string; a string
// in double quotes ("\"true\"") is the string inside them; "null" is null;
// "true" and "false" (any case) are booleans; a string starting with "{"
// or "[" is that JSON document; a JSON number ("3", "1.5") is a number;
// anything else is the string itself. So value: "3" and value: 3 are both
// the number 3, and value: "\"3\"" is the string "3". A missing value is
// the empty string. As an extension, a value written as a YAML mapping,
// list or null is used as it is. Numbers compare by value (1 equals 1.0).
//
// # Differences from Velero
//
//   - All three patch lists of a rule are applied; Velero applies only the
//     first non-empty one (patches, else mergePatches, else
//     strategicPatches).
//   - Apply stops at the first rule that fails and leaves the object
//     unchanged; Velero logs the error and goes on with the next rule.
//   - Parse checks everything up front (regexps, selectors, globs, paths,
//     patch data) where Velero finds some mistakes only while restoring.
//   - Strategic patches on custom resources fall back to a merge patch,
//     where Velero fails.
package modifiers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
)

// Rules is a parsed and validated resource-modifiers file, made by Parse or
// Load. It is safe for concurrent use. A nil *Rules holds no rules.
type Rules struct {
	rules []rule
}

// rule is one validated entry of resourceModifierRules.
type rule struct {
	index int // 1-based, for messages

	groupResource *regexp.Regexp
	nameRegex     *regexp.Regexp   // nil: any name
	namespaces    []*regexp.Regexp // nil: all namespaces
	selector      labels.Selector  // nil: any labels
	matches       []matchRule

	patches          []jsonOp
	mergePatches     [][]byte // JSON objects
	strategicPatches [][]byte // JSON objects
}

// matchRule is one entry of conditions.matches.
type matchRule struct {
	tokens []string // decoded JSON-pointer reference tokens
	value  any      // decoded with json.Number
}

// jsonOp is one RFC 6902 operation, kept as a one-operation patch so that
// a failure can be traced to its index.
type jsonOp struct {
	op, path, from string
	patch          jsonpatch.Patch
}

func (o *jsonOp) String() string {
	if o.op == "move" || o.op == "copy" {
		return o.op + " " + o.from + " to " + o.path
	}
	return o.op + " " + o.path
}

// Len returns the number of rules.
func (r *Rules) Len() int {
	if r == nil {
		return 0
	}
	return len(r.rules)
}

// Apply runs the rules, in order, on obj, which the caller restores as the
// resource groupResource: "resource" for the core group ("pods") or
// "resource.group" ("deployments.apps"), as schema.GroupResource.String()
// spells it.
//
// Each rule whose conditions match applies its patches and adds a note
// such as "resource modifier rule 1 applied: 1 JSON patch, 1 merge patch";
// a rule skipped because a "test" operation failed adds a note saying so.
// When any rule changed the object, obj.Object is replaced by the result.
//
// If a patch cannot be applied (say a "replace" at a path the object does
// not have) Apply returns an error naming the object, the rule, and the
// patch, for example
//
//	resource modifiers: deployments.apps shop/web: rule 1: patches[0] (replace /spec/x): ...
//
// and obj is left as it was: no rule's changes are kept. Apply also fails
// if the result is not an object with a kind.
func (r *Rules) Apply(obj *unstructured.Unstructured, groupResource string) (notes []string, err error) {
	if r.Len() == 0 {
		return nil, nil
	}
	if obj == nil || obj.Object == nil {
		return nil, errors.New("resource modifiers: no object")
	}
	var (
		orig    []byte // obj as JSON, made when first needed
		doc     []byte // the patched object as JSON
		generic any    // orig decoded for matches
		applied bool
	)
	encode := func() ([]byte, error) {
		if orig == nil {
			b, err := json.Marshal(obj.Object)
			if err != nil {
				return nil, fmt.Errorf("resource modifiers: %s: encoding object: %w", describe(obj, groupResource), err)
			}
			orig = b
		}
		return orig, nil
	}
	for i := range r.rules {
		ru := &r.rules[i]
		if !ru.selects(obj, groupResource) {
			continue
		}
		if len(ru.matches) > 0 {
			b, err := encode()
			if err != nil {
				return nil, err
			}
			if generic == nil {
				if generic, err = decodeGeneric(b); err != nil {
					return nil, fmt.Errorf("resource modifiers: %s: decoding object: %w", describe(obj, groupResource), err)
				}
			}
			if !ru.matchesHold(generic) {
				continue
			}
		}
		if doc == nil {
			if doc, err = encode(); err != nil {
				return nil, err
			}
		}
		out, note, changed, err := ru.apply(doc)
		if err != nil {
			return nil, fmt.Errorf("resource modifiers: %s: rule %d: %w", describe(obj, groupResource), ru.index, err)
		}
		notes = append(notes, note)
		if changed {
			doc, applied = out, true
		}
	}
	if !applied {
		return notes, nil
	}
	var result map[string]any
	if err := utiljson.Unmarshal(doc, &result); err != nil {
		return nil, fmt.Errorf("resource modifiers: %s: decoding result: %w", describe(obj, groupResource), err)
	}
	if result == nil {
		return nil, fmt.Errorf("resource modifiers: %s: the patched object is not a JSON object", describe(obj, groupResource))
	}
	if kind, _ := result["kind"].(string); kind == "" {
		return nil, fmt.Errorf("resource modifiers: %s: the patched object has no kind", describe(obj, groupResource))
	}
	obj.Object = result
	return notes, nil
}

// selects reports whether the rule's namespace, resource, name and label
// conditions hold for obj.
func (ru *rule) selects(obj *unstructured.Unstructured, groupResource string) bool {
	if ns := obj.GetNamespace(); ns != "" && ru.namespaces != nil {
		found := false
		for _, g := range ru.namespaces {
			if g.MatchString(ns) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if !ru.groupResource.MatchString(groupResource) {
		return false
	}
	if ru.nameRegex != nil && !ru.nameRegex.MatchString(obj.GetName()) {
		return false
	}
	if ru.selector != nil && !ru.selector.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	return true
}

// matchesHold reports whether every matches entry holds for doc, the
// object decoded with json.Number.
func (ru *rule) matchesHold(doc any) bool {
	for _, m := range ru.matches {
		v, ok := lookup(doc, m.tokens)
		if !ok || !jsonEqual(v, m.value) {
			return false
		}
	}
	return true
}

// apply applies the rule's patches to doc. It returns the result, the
// rule's note, and whether the rule changed anything (false when a test
// operation failed and the rule was skipped).
func (ru *rule) apply(doc []byte) (out []byte, note string, changed bool, err error) {
	cur := doc
	for j := range ru.patches {
		op := &ru.patches[j]
		next, err := op.patch.Apply(cur)
		if err != nil {
			if op.op == "test" && (errors.Is(err, jsonpatch.ErrTestFailed) || errors.Is(err, jsonpatch.ErrMissing)) {
				return doc, fmt.Sprintf("resource modifier rule %d skipped: patches[%d] (%s) did not hold", ru.index, j, op), false, nil
			}
			return nil, "", false, fmt.Errorf("patches[%d] (%s): %w", j, op, err)
		}
		cur = next
	}
	for j, p := range ru.mergePatches {
		next, err := jsonpatch.MergePatch(cur, p)
		if err != nil {
			return nil, "", false, fmt.Errorf("mergePatches[%d]: %w", j, err)
		}
		cur = next
	}
	var fallback string
	if len(ru.strategicPatches) > 0 {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(cur, &tm); err != nil {
			return nil, "", false, fmt.Errorf("strategicPatches: reading the object's kind: %w", err)
		}
		gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
		typed, terr := scheme.Scheme.New(gvk)
		if terr != nil {
			fallback = fmt.Sprintf("kind %q of %q has no built-in type", tm.Kind, tm.APIVersion)
		}
		for j, p := range ru.strategicPatches {
			var next []byte
			if typed == nil {
				next, err = jsonpatch.MergePatch(cur, p)
			} else {
				next, err = strategicMerge(cur, p, typed)
			}
			if err != nil {
				return nil, "", false, fmt.Errorf("strategicPatches[%d]: %w", j, err)
			}
			cur = next
		}
	}
	return cur, ru.note(fallback), true, nil
}

// strategicMerge applies a strategic merge patch; a panic in the patch
// library (on odd patch data) is turned into an error.
func strategicMerge(doc, patch []byte, typed any) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("strategic merge patch failed: %v", p)
		}
	}()
	return strategicpatch.StrategicMergePatch(doc, patch, typed)
}

// note describes an applied rule. fallback, when not empty, says why its
// strategic patches were applied as merge patches.
func (ru *rule) note(fallback string) string {
	var parts []string
	count := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	count(len(ru.patches), "JSON patch", "JSON patches")
	count(len(ru.mergePatches), "merge patch", "merge patches")
	count(len(ru.strategicPatches), "strategic patch", "strategic patches")
	if fallback != "" && len(parts) > 0 {
		parts[len(parts)-1] += " (applied as JSON merge patch: " + fallback + ")"
	}
	return fmt.Sprintf("resource modifier rule %d applied: %s", ru.index, strings.Join(parts, ", "))
}

// describe names obj for messages: "deployments.apps shop/web".
func describe(obj *unstructured.Unstructured, groupResource string) string {
	what := groupResource
	if what == "" {
		what = obj.GetKind()
	}
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return what + " " + name
}

// decodeGeneric decodes JSON into maps, slices and json.Number values.
func decodeGeneric(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
