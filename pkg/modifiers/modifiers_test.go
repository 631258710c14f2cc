package modifiers

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// fixtures, as YAML; each test gets a fresh copy.
const (
	pvcYAML = `
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: mysql-0
  namespace: bar
  labels: {foo: bar, test: "yes"}
  annotations: {foo: x, keep: "1"}
spec:
  storageClassName: standard
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
`
	deployYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web, tier: front}
spec:
  replicas: 3
  paused: false
  template:
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports: [{containerPort: 80}]
      - name: sidecar
        image: envoy:1.30
`
	widgetYAML = `
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
  namespace: shop
  labels: {w: "1"}
spec:
  size: 1
  items: [a, b]
  nested: {p: 1, q: 2}
`
	namespaceYAML = `
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {team: a}
`
)

func object(t testing.TB, y string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	// Round-trip through JSON the way unstructured objects are read, so
	// integers are int64.
	u := &unstructured.Unstructured{}
	b, _ := json.Marshal(m)
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u
}

// normal returns u as generic JSON, for comparisons that ignore int64 vs
// float64.
func normal(t testing.TB, u *unstructured.Unstructured) any {
	t.Helper()
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func set(t testing.TB, u *unstructured.Unstructured, value any, path ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
		t.Fatal(err)
	}
}

func TestApply(t *testing.T) {
	tests := []struct {
		name          string
		rules         string
		obj           string
		groupResource string
		// want changes a copy of obj into the expected result; nil means
		// obj must come out unchanged.
		want      func(t *testing.T, u *unstructured.Unstructured)
		wantNotes []string
	}{
		{
			name: "JSON patch, Velero's template",
			rules: `
version: v1
resourceModifierRules:
- conditions:
    groupResource: persistentvolumeclaims
    resourceNameRegex: "^mysql.*$"
    namespaces: [bar, foo]
    labelSelector:
      matchLabels: {foo: bar}
  patches:
  - operation: replace
    path: "/spec/storageClassName"
    value: "premium"
  - operation: remove
    path: "/metadata/labels/test"
`,
			obj: pvcYAML, groupResource: "persistentvolumeclaims",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				set(t, u, "premium", "spec", "storageClassName")
				unstructured.RemoveNestedField(u.Object, "metadata", "labels", "test")
			},
			wantNotes: []string{"resource modifier rule 1 applied: 2 JSON patches"},
		},
		{
			name: "JSON patch values are read as Velero reads them",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: widgets.example.com}
  patches:
  - {operation: replace, path: /spec/size, value: "5"}
  - {operation: add, path: /spec/flag, value: "true"}
  - {operation: add, path: /spec/quoted, value: "\"true\""}
  - {operation: add, path: /spec/none, value: "null"}
  - {operation: add, path: /spec/obj, value: "{\"a\": [1, 2]}"}
  - {operation: add, path: /spec/float, value: 1.5}
  - {operation: add, path: /spec/yamlmap, value: {k: v}}
  - {operation: add, path: /spec/empty}
  - {operation: add, path: /spec/yamlnull, value: ~}
  - {operation: add, path: /spec/items/-, value: c}
  - {operation: add, path: /metadata/annotations, value: "{}"}
  - {operation: add, path: "/metadata/annotations/example.com~1a~0b", value: yes}
`,
			obj: widgetYAML, groupResource: "widgets.example.com",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				set(t, u, int64(5), "spec", "size")
				set(t, u, true, "spec", "flag")
				set(t, u, "true", "spec", "quoted")
				set(t, u, nil, "spec", "none")
				set(t, u, map[string]any{"a": []any{int64(1), int64(2)}}, "spec", "obj")
				set(t, u, 1.5, "spec", "float")
				set(t, u, map[string]any{"k": "v"}, "spec", "yamlmap")
				set(t, u, "", "spec", "empty")
				set(t, u, nil, "spec", "yamlnull")
				set(t, u, []any{"a", "b", "c"}, "spec", "items")
				set(t, u, map[string]any{"example.com/a~b": true}, "metadata", "annotations")
			},
			wantNotes: []string{"resource modifier rule 1 applied: 12 JSON patches"},
		},
		{
			name: "JSON patch copy and move, Velero's other example",
			rules: `
version: v1
resourceModifierRules:
- conditions:
    groupResource: deployments.apps
    resourceNameRegex: "^web$"
  patches:
  - operation: add
    path: "/spec/template/spec/containers/0"
    value: "{\"name\": \"init\", \"image\": \"busybox\"}"
  - operation: copy
    from: "/metadata/labels/app"
    path: "/metadata/labels/origin"
  - operation: move
    from: "/metadata/labels/tier"
    path: "/metadata/labels/layer"
`,
			obj: deployYAML, groupResource: "deployments.apps",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				set(t, u, append([]any{map[string]any{"name": "init", "image": "busybox"}}, cs...), "spec", "template", "spec", "containers")
				set(t, u, map[string]any{"app": "web", "origin": "web", "layer": "front"}, "metadata", "labels")
			},
			wantNotes: []string{"resource modifier rule 1 applied: 3 JSON patches"},
		},
		{
			name: "merge patch sets and deletes keys",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: persistentvolumeclaims, namespaces: [bar]}
  mergePatches:
  - patchData: |
      {"metadata": {"annotations": {"foo": null, "new": "v"}}}
  - patchData: |
      spec:
        storageClassName: premium
        accessModes: [ReadWriteMany]
`,
			obj: pvcYAML, groupResource: "persistentvolumeclaims",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				set(t, u, map[string]any{"keep": "1", "new": "v"}, "metadata", "annotations")
				set(t, u, "premium", "spec", "storageClassName")
				set(t, u, []any{"ReadWriteMany"}, "spec", "accessModes")
			},
			wantNotes: []string{"resource modifier rule 1 applied: 2 merge patches"},
		},
		{
			name: "strategic patch merges containers by name",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps}
  strategicPatches:
  - patchData: |
      {"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "repo2/nginx"}]}}}}
`,
			obj: deployYAML, groupResource: "deployments.apps",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				cs[0].(map[string]any)["image"] = "repo2/nginx"
				set(t, u, cs, "spec", "template", "spec", "containers")
			},
			wantNotes: []string{"resource modifier rule 1 applied: 1 strategic patch"},
		},
		{
			name: "the same patch as a merge patch replaces the list",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps}
  mergePatches:
  - patchData: |
      {"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "repo2/nginx"}]}}}}
`,
			obj: deployYAML, groupResource: "deployments.apps",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				set(t, u, []any{map[string]any{"name": "nginx", "image": "repo2/nginx"}}, "spec", "template", "spec", "containers")
			},
			wantNotes: []string{"resource modifier rule 1 applied: 1 merge patch"},
		},
		{
			name: "strategic patch on a custom resource falls back to a merge patch",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: widgets.example.com}
  strategicPatches:
  - patchData: |
      spec:
        items: [c]
        nested: {p: null}
`,
			obj: widgetYAML, groupResource: "widgets.example.com",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				set(t, u, []any{"c"}, "spec", "items")
				set(t, u, map[string]any{"q": int64(2)}, "spec", "nested")
			},
			wantNotes: []string{`resource modifier rule 1 applied: 1 strategic patch (applied as JSON merge patch: kind "Widget" of "example.com/v1" has no built-in type)`},
		},
		{
			name: "JSON, then merge, then strategic patches in one rule",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps}
  strategicPatches:
  - patchData: '{"metadata": {"annotations": {"step": "strategic"}}}'
  mergePatches:
  - patchData: '{"metadata": {"annotations": {"step": "merge", "merged": "yes"}}}'
  patches:
  - {operation: add, path: /metadata/annotations, value: {step: json, json: "yes"}}
`,
			obj: deployYAML, groupResource: "deployments.apps",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				set(t, u, map[string]any{"step": "strategic", "json": "yes", "merged": "yes"}, "metadata", "annotations")
			},
			wantNotes: []string{"resource modifier rule 1 applied: 1 JSON patch, 1 merge patch, 1 strategic patch"},
		},
		{
			name: "rules apply in order, each to the result of the one before",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps}
  patches:
  - {operation: replace, path: /spec/replicas, value: "1"}
  - {operation: add, path: /metadata/labels/order, value: first}
- conditions: {groupResource: deployments.apps}
  patches:
  - {operation: test, path: /spec/replicas, value: "1"}
  - {operation: replace, path: /metadata/labels/order, value: second}
`,
			obj: deployYAML, groupResource: "deployments.apps",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				set(t, u, int64(1), "spec", "replicas")
				set(t, u, "second", "metadata", "labels", "order")
			},
			wantNotes: []string{
				"resource modifier rule 1 applied: 2 JSON patches",
				"resource modifier rule 2 applied: 2 JSON patches",
			},
		},
		{
			name: "conditions see the object as it came, as in Velero",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: persistentvolumeclaims}
  patches:
  - {operation: replace, path: /spec/storageClassName, value: premium}
- conditions:
    groupResource: persistentvolumeclaims
    matches: [{path: /spec/storageClassName, value: premium}]
  patches:
  - {operation: add, path: /metadata/labels/second, value: ran}
`,
			obj: pvcYAML, groupResource: "persistentvolumeclaims",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				set(t, u, "premium", "spec", "storageClassName")
			},
			wantNotes: []string{"resource modifier rule 1 applied: 1 JSON patch"},
		},
		{
			name: "a failing test operation skips its rule, Velero's conditional patch",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: persistentvolumeclaims}
  patches:
  - {operation: test, path: /spec/storageClassName, value: premium}
  - {operation: replace, path: /spec/storageClassName, value: standard}
  mergePatches:
  - patchData: '{"metadata": {"labels": {"skipped": "no"}}}'
- conditions: {groupResource: persistentvolumeclaims}
  patches:
  - {operation: test, path: /spec/missing/deep, value: x}
  - {operation: add, path: /metadata/labels/skipped, value: "no"}
`,
			obj: pvcYAML, groupResource: "persistentvolumeclaims",
			wantNotes: []string{
				"resource modifier rule 1 skipped: patches[0] (test /spec/storageClassName) did not hold",
				"resource modifier rule 2 skipped: patches[0] (test /spec/missing/deep) did not hold",
			},
		},
		{
			name: "a test that holds lets the rule apply",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: persistentvolumeclaims}
  patches:
  - {operation: test, path: /spec/storageClassName, value: standard}
  - {operation: replace, path: /spec/storageClassName, value: premium}
`,
			obj: pvcYAML, groupResource: "persistentvolumeclaims",
			want: func(t *testing.T, u *unstructured.Unstructured) {
				set(t, u, "premium", "spec", "storageClassName")
			},
			wantNotes: []string{"resource modifier rule 1 applied: 2 JSON patches"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.rules))
			if err != nil {
				t.Fatal(err)
			}
			u := object(t, tc.obj)
			want := object(t, tc.obj)
			if tc.want != nil {
				tc.want(t, want)
			}
			notes, err := r.Apply(u, tc.groupResource)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(notes, tc.wantNotes) {
				t.Errorf("notes:\n got %q\nwant %q", notes, tc.wantNotes)
			}
			if got, w := normal(t, u), normal(t, want); !reflect.DeepEqual(got, w) {
				gb, _ := json.MarshalIndent(got, "", " ")
				wb, _ := json.MarshalIndent(w, "", " ")
				t.Errorf("object:\n got %s\nwant %s", gb, wb)
			}
		})
	}
}

// TestConditions checks each condition that holds and that does not: a
// rule that matches adds a label.
func TestConditions(t *testing.T) {
	const patch = `
  patches:
  - {operation: add, path: /metadata/labels/hit, value: "y"}
`
	tests := []struct {
		name          string
		conditions    string
		obj           string
		groupResource string
		match         bool
	}{
		{"group resource equal", `{groupResource: deployments.apps}`, deployYAML, "deployments.apps", true},
		{"group resource differs", `{groupResource: deployments.apps}`, deployYAML, "deployments.extensions", false},
		{"resource without group is the core group", `{groupResource: deployments}`, deployYAML, "deployments.apps", false},
		{"core resource", `{groupResource: persistentvolumeclaims}`, pvcYAML, "persistentvolumeclaims", true},
		{"glob *.apps", `{groupResource: "*.apps"}`, deployYAML, "deployments.apps", true},
		{"glob * is the core group only", `{groupResource: "*"}`, deployYAML, "deployments.apps", false},
		{"glob * matches a core resource", `{groupResource: "*"}`, pvcYAML, "persistentvolumeclaims", true},
		{"glob *.* matches one group", `{groupResource: "*.*"}`, deployYAML, "deployments.apps", true},
		{"glob *.* is not the core group", `{groupResource: "*.*"}`, pvcYAML, "persistentvolumeclaims", false},
		{"glob ** matches all", `{groupResource: "**"}`, widgetYAML, "widgets.example.com", true},
		{"glob alternatives", `{groupResource: "{deployments,statefulsets}.apps"}`, deployYAML, "deployments.apps", true},
		{"namespace listed", `{groupResource: "*", namespaces: [foo, bar]}`, pvcYAML, "persistentvolumeclaims", true},
		{"namespace not listed", `{groupResource: "*", namespaces: [foo]}`, pvcYAML, "persistentvolumeclaims", false},
		{"namespace glob", `{groupResource: "*", namespaces: ["b*"]}`, pvcYAML, "persistentvolumeclaims", true},
		{"namespace star", `{groupResource: "*", namespaces: ["*"]}`, pvcYAML, "persistentvolumeclaims", true},
		{"cluster-scoped object ignores namespaces", `{groupResource: namespaces, namespaces: [foo]}`, namespaceYAML, "namespaces", true},
		{"name regex matches", `{groupResource: "*", resourceNameRegex: "^mysql-[0-9]+$"}`, pvcYAML, "persistentvolumeclaims", true},
		{"name regex is unanchored", `{groupResource: "*", resourceNameRegex: "sql"}`, pvcYAML, "persistentvolumeclaims", true},
		{"name regex does not match", `{groupResource: "*", resourceNameRegex: "^postgres"}`, pvcYAML, "persistentvolumeclaims", false},
		{"label selector matches", `{groupResource: "*", labelSelector: {matchLabels: {foo: bar}}}`, pvcYAML, "persistentvolumeclaims", true},
		{"label selector does not match", `{groupResource: "*", labelSelector: {matchLabels: {foo: baz}}}`, pvcYAML, "persistentvolumeclaims", false},
		{"label selector expression", `{groupResource: "*", labelSelector: {matchExpressions: [{key: foo, operator: In, values: [bar, baz]}]}}`, pvcYAML, "persistentvolumeclaims", true},
		{"label selector expression fails", `{groupResource: "*", labelSelector: {matchExpressions: [{key: foo, operator: DoesNotExist}]}}`, pvcYAML, "persistentvolumeclaims", false},
		{"matches string", `{groupResource: "*", matches: [{path: /spec/storageClassName, value: standard}]}`, pvcYAML, "persistentvolumeclaims", true},
		{"matches string differs", `{groupResource: "*", matches: [{path: /spec/storageClassName, value: premium}]}`, pvcYAML, "persistentvolumeclaims", false},
		{"matches number as string", `{groupResource: "*.apps", matches: [{path: /spec/replicas, value: "3"}]}`, deployYAML, "deployments.apps", true},
		{"matches number", `{groupResource: "*.apps", matches: [{path: /spec/replicas, value: 3}]}`, deployYAML, "deployments.apps", true},
		{"matches number 3.0", `{groupResource: "*.apps", matches: [{path: /spec/replicas, value: 3.0}]}`, deployYAML, "deployments.apps", true},
		{"matches number differs", `{groupResource: "*.apps", matches: [{path: /spec/replicas, value: 4}]}`, deployYAML, "deployments.apps", false},
		{"matches quoted number is a string", `{groupResource: "*.apps", matches: [{path: /spec/replicas, value: "\"3\""}]}`, deployYAML, "deployments.apps", false},
		{"matches bool", `{groupResource: "*.apps", matches: [{path: /spec/paused, value: "false"}]}`, deployYAML, "deployments.apps", true},
		{"matches bool differs", `{groupResource: "*.apps", matches: [{path: /spec/paused, value: true}]}`, deployYAML, "deployments.apps", false},
		{"matches list element", `{groupResource: "*.apps", matches: [{path: /spec/template/spec/containers/1/name, value: sidecar}]}`, deployYAML, "deployments.apps", true},
		{"matches object", `{groupResource: "*.apps", matches: [{path: /spec/template/spec/containers/0/ports/0, value: {containerPort: 80}}]}`, deployYAML, "deployments.apps", true},
		{"matches path missing", `{groupResource: "*.apps", matches: [{path: /spec/nothing, value: "null"}]}`, deployYAML, "deployments.apps", false},
		{"matches index out of range", `{groupResource: "*.apps", matches: [{path: /spec/template/spec/containers/2/name, value: x}]}`, deployYAML, "deployments.apps", false},
		{"all matches must hold", `{groupResource: "*.apps", matches: [{path: /spec/replicas, value: 3}, {path: /spec/paused, value: true}]}`, deployYAML, "deployments.apps", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte("version: v1\nresourceModifierRules:\n- conditions: " + tc.conditions + patch))
			if err != nil {
				t.Fatal(err)
			}
			u := object(t, tc.obj)
			notes, err := r.Apply(u, tc.groupResource)
			if err != nil {
				t.Fatal(err)
			}
			_, hit, _ := unstructured.NestedString(u.Object, "metadata", "labels", "hit")
			if hit != tc.match || (len(notes) == 1) != tc.match {
				t.Errorf("matched = %v (notes %q), want %v", hit, notes, tc.match)
			}
		})
	}
}

func TestApplyErrorsLeaveObjectUnchanged(t *testing.T) {
	tests := []struct {
		name          string
		rules         string
		obj           string
		groupResource string
		wantErr       []string
	}{
		{
			name: "replace at a missing path",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: persistentvolumeclaims}
  patches:
  - {operation: replace, path: /spec/x, value: "1"}
`,
			obj: pvcYAML, groupResource: "persistentvolumeclaims",
			wantErr: []string{"resource modifiers: persistentvolumeclaims bar/mysql-0: rule 1: patches[0] (replace /spec/x): ", "missing"},
		},
		{
			name: "a later rule fails after an earlier one applied",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps}
  patches:
  - {operation: replace, path: /spec/replicas, value: "1"}
  mergePatches:
  - patchData: '{"metadata": {"labels": {"x": "y"}}}'
- conditions: {groupResource: deployments.apps}
  patches:
  - {operation: add, path: /metadata/labels/ok, value: "1"}
  - {operation: remove, path: /spec/template/spec/containers/5}
`,
			obj: deployYAML, groupResource: "deployments.apps",
			wantErr: []string{"deployments.apps shop/web: rule 2: patches[1] (remove /spec/template/spec/containers/5): "},
		},
		{
			name: "move from a missing path",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: "*"}
  patches:
  - {operation: move, from: /metadata/labels/none, path: /metadata/labels/x}
`,
			obj: namespaceYAML, groupResource: "namespaces",
			wantErr: []string{"namespaces team-a: rule 1: patches[0] (move /metadata/labels/none to /metadata/labels/x): "},
		},
		{
			name: "strategic patch without the merge key",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps}
  strategicPatches:
  - patchData: '{"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}'
`,
			obj: deployYAML, groupResource: "deployments.apps",
			wantErr: []string{"rule 1: strategicPatches[0]: ", "name"},
		},
		{
			name: "a patch that removes the kind",
			rules: `
version: v1
resourceModifierRules:
- conditions: {groupResource: widgets.example.com}
  patches:
  - {operation: remove, path: /kind}
`,
			obj: widgetYAML, groupResource: "widgets.example.com",
			wantErr: []string{"widgets.example.com shop/w1: the patched object has no kind"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.rules))
			if err != nil {
				t.Fatal(err)
			}
			u := object(t, tc.obj)
			before := u.DeepCopy()
			notes, err := r.Apply(u, tc.groupResource)
			if err == nil {
				t.Fatalf("no error; notes %q", notes)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if notes != nil {
				t.Errorf("notes with an error: %q", notes)
			}
			if !reflect.DeepEqual(u.Object, before.Object) {
				t.Errorf("object changed:\n got %v\nwant %v", u.Object, before.Object)
			}
		})
	}
}

func TestApplyNoMatchLeavesObjectAlone(t *testing.T) {
	r, err := Parse([]byte(`
version: v1
resourceModifierRules:
- conditions: {groupResource: pods}
  patches: [{operation: remove, path: /spec}]
`))
	if err != nil {
		t.Fatal(err)
	}
	u := object(t, deployYAML)
	before := u.Object
	notes, err := r.Apply(u, "deployments.apps")
	if err != nil || notes != nil {
		t.Fatalf("Apply = %q, %v", notes, err)
	}
	if reflect.ValueOf(u.Object).Pointer() != reflect.ValueOf(before).Pointer() {
		t.Error("object replaced although no rule matched")
	}
	var none *Rules
	if notes, err := none.Apply(u, "pods"); notes != nil || err != nil || none.Len() != 0 {
		t.Errorf("nil rules: %q, %v", notes, err)
	}
	if _, err := r.Apply(nil, "pods"); err == nil {
		t.Error("nil object accepted")
	}
}

func TestParseErrors(t *testing.T) {
	const head = "version: v1\nresourceModifierRules:\n"
	const good = "- conditions: {groupResource: pods}\n  patches: [{operation: remove, path: /spec}]\n"
	tests := []struct {
		name string
		yaml string
		want string // the whole message after "resource modifiers: ", or a part
	}{
		{"invalid YAML", "version: v1\n  bad: [", "yaml: line"},
		{"not a mapping", "- a\n- b", "got a list, want a mapping"},
		{"duplicate field", "version: v1\nversion: v1\n", `"version" already set`},
		{"unknown version", "version: v2\nresourceModifierRules:\n" + good, `version "v2": not supported (want "v1")`},
		{"missing version", "resourceModifierRules:\n" + good, `version "": not supported`},
		{"unknown top-level field", head + good + "extra: 1\n", `unknown field "extra"`},
		{"no rules", head, "resourceModifierRules: must not be empty"},
		{"empty rule", head + good + "- \n", "rule 2: must be a mapping"},
		{"unknown rule field", head + "- conditions: {groupResource: pods}\n  patch: []\n", `rule 1: unknown field "patch"`},
		{"unknown condition field", head + "- conditions: {groupResource: pods, namespace: [a]}\n  patches: [{operation: remove, path: /a}]\n", `rule 1: conditions: unknown field "namespace"`},
		{"wrong type", head + "- conditions: {groupResource: pods, namespaces: a}\n  patches: [{operation: remove, path: /a}]\n", "rule 1: conditions: namespaces: got a string, want a list"},
		{"no groupResource", head + "- patches: [{operation: remove, path: /a}]\n", "rule 1: conditions.groupResource: must not be empty"},
		{"bad groupResource glob", head + good + "- conditions: {groupResource: \"[pods\"}\n  patches: [{operation: remove, path: /a}]\n", `rule 2: conditions.groupResource "[pods": has a "[" without "]"`},
		{"bad namespace glob", head + "- conditions: {groupResource: pods, namespaces: [\"{a,b\"]}\n  patches: [{operation: remove, path: /a}]\n", `rule 1: conditions.namespaces[0] "{a,b": has a "{" without "}"`},
		{"empty namespace", head + "- conditions: {groupResource: pods, namespaces: [a, \"\"]}\n  patches: [{operation: remove, path: /a}]\n", `rule 1: conditions.namespaces[1]: must not be empty`},
		{"invalid regex", head + good + "- conditions: {groupResource: pods, resourceNameRegex: \"a(\"}\n  patches: [{operation: remove, path: /a}]\n", `rule 2: conditions.resourceNameRegex "a(": error parsing regexp`},
		{"invalid label selector operator", head + "- conditions: {groupResource: pods, labelSelector: {matchExpressions: [{key: a, operator: Near}]}}\n  patches: [{operation: remove, path: /a}]\n", `rule 1: conditions.labelSelector: "Near" is not a valid label selector operator`},
		{"invalid label value", head + "- conditions: {groupResource: pods, labelSelector: {matchLabels: {a: \"b c\"}}}\n  patches: [{operation: remove, path: /a}]\n", `rule 1: conditions.labelSelector: `},
		{"unknown label selector field", head + "- conditions: {groupResource: pods, labelSelector: {matchLabel: {a: b}}}\n  patches: [{operation: remove, path: /a}]\n", `rule 1: conditions.labelSelector: unknown field "matchLabel"`},
		{"matches without path", head + "- conditions: {groupResource: pods, matches: [{value: a}]}\n  patches: [{operation: remove, path: /a}]\n", `rule 1: conditions.matches[0].path "": must not be empty`},
		{"matches relative path", head + "- conditions: {groupResource: pods, matches: [{path: spec/x, value: a}]}\n  patches: [{operation: remove, path: /a}]\n", `rule 1: conditions.matches[0].path "spec/x": must start with "/"`},
		{"matches unknown field", head + "- conditions: {groupResource: pods, matches: [{path: /a, values: a}]}\n  patches: [{operation: remove, path: /a}]\n", `rule 1: conditions.matches[0]: unknown field "values"`},
		{"matches bad JSON value", head + "- conditions: {groupResource: pods, matches: [{path: /a, value: \"[1,\"}]}\n  patches: [{operation: remove, path: /a}]\n", `rule 1: conditions.matches[0].value: "[1," starts like a JSON object or array but is not valid JSON`},
		{"relative patch path", head + good + "- conditions: {groupResource: pods}\n  patches:\n  - {operation: replace, path: spec/x, value: a}\n", `rule 2: patches[0].path "spec/x": must start with "/"`},
		{"empty patch path", head + "- conditions: {groupResource: pods}\n  patches: [{operation: remove}]\n", `rule 1: patches[0].path "": must not be empty`},
		{"bad pointer escape", head + "- conditions: {groupResource: pods}\n  patches: [{operation: remove, path: /a~2b}]\n", `rule 1: patches[0].path "/a~2b": "~" must be followed by "0" or "1"`},
		{"unknown operation", head + "- conditions: {groupResource: pods}\n  patches: [{operation: update, path: /a}]\n", `rule 1: patches[0].operation "update": not one of add, remove, replace, move, copy and test`},
		{"missing operation", head + "- conditions: {groupResource: pods}\n  patches: [{path: /a}]\n", `rule 1: patches[0].operation: must not be empty`},
		{"unknown patch field", head + "- conditions: {groupResource: pods}\n  patches: [{op: remove, path: /a}]\n", `rule 1: patches[0]: unknown field "op"`},
		{"move without from", head + "- conditions: {groupResource: pods}\n  patches: [{operation: move, path: /a}]\n", `rule 1: patches[0].from: required for move`},
		{"copy with relative from", head + "- conditions: {groupResource: pods}\n  patches: [{operation: copy, from: a, path: /a}]\n", `rule 1: patches[0].from "a": must start with "/"`},
		{"bad JSON value", head + "- conditions: {groupResource: pods}\n  patches: [{operation: add, path: /a, value: \"{a: 1}\"}]\n", `rule 1: patches[0].value: "{a: 1}" starts like a JSON object`},
		{"invalid merge patchData", head + "- conditions: {groupResource: pods}\n  mergePatches: [{patchData: \"{a: [\"}]\n", `rule 1: mergePatches[0].patchData: not valid JSON or YAML`},
		{"merge patchData not an object", head + "- conditions: {groupResource: pods}\n  mergePatches: [{patchData: \"[1, 2]\"}]\n", `rule 1: mergePatches[0].patchData: must be a JSON or YAML object`},
		{"empty strategic patchData", head + "- conditions: {groupResource: pods}\n  strategicPatches: [{patchData: \"\"}]\n", `rule 1: strategicPatches[0].patchData: must not be empty`},
		{"strategic patchData a string", head + "- conditions: {groupResource: pods}\n  strategicPatches: [{patchData: hello}]\n", `rule 1: strategicPatches[0].patchData: must be a JSON or YAML object`},
		{"strategic patchData duplicate key", head + "- conditions: {groupResource: pods}\n  strategicPatches: [{patchData: \"{a: 1, a: 2}\"}]\n", `rule 1: strategicPatches[0].patchData: not valid JSON or YAML`},
		{"unknown patchData field", head + "- conditions: {groupResource: pods}\n  strategicPatches: [{patch: \"{}\"}]\n", `rule 1: strategicPatches[0]: unknown field "patch"`},
		{"no patches", head + good + "- conditions: {groupResource: pods}\n", "rule 2: no patches: set at least one of patches, mergePatches and strategicPatches"},
		{"empty patch lists", head + "- conditions: {groupResource: pods}\n  patches: []\n  mergePatches: []\n", "rule 1: no patches"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error; %d rules", r.Len())
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "resource modifiers: ") {
				t.Errorf("error %q does not start with %q", msg, "resource modifiers: ")
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not contain %q", msg, tc.want)
			}
		})
	}
}

// TestParseExactMessage pins one message whole.
func TestParseExactMessage(t *testing.T) {
	_, err := Parse([]byte(`
version: v1
resourceModifierRules:
- conditions: {groupResource: pods}
  patches: [{operation: remove, path: /spec}]
- conditions: {groupResource: pods}
  patches:
  - operation: replace
    path: "spec/x"
    value: "1"
`))
	const want = `resource modifiers: rule 2: patches[0].path "spec/x": must start with "/"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestParseVeleroCompatibility(t *testing.T) {
	// Velero's decoder is case-insensitive about keys, turns YAML numbers
	// into strings for string fields, and takes "V1".
	r, err := Parse([]byte(`
Version: V1
resourceModifierRules:
- Conditions:
    groupResource: pods
    namespaces: [2024]
  patches:
  - {operation: Replace, path: /spec/x, value: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 1 || r.rules[0].namespaces[0].String() == "" || r.rules[0].patches[0].op != "replace" {
		t.Errorf("parsed %+v", r.rules)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "2024"}, "spec": map[string]any{"x": int64(0)}}}
	notes, err := r.Apply(u, "pods")
	if err != nil || len(notes) != 1 {
		t.Fatalf("Apply = %q, %v", notes, err)
	}
	if x, _, _ := unstructured.NestedInt64(u.Object, "spec", "x"); x != 1 {
		t.Errorf("spec.x = %d, want 1", x)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods}\n  patches: [{operation: remove, path: /spec}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Load(good)
	if err != nil || r.Len() != 1 {
		t.Fatalf("Load(good) = %v, %v", r, err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "resource modifiers: "+bad+": rule 1: no patches") {
		t.Errorf("Load(bad) error = %v", err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) error = %v", err)
	}
}

func TestPatchValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `""`},
		{`""`, `""`},
		{`"premium"`, `"premium"`},
		{`"3"`, `3`},
		{`"-1.5e3"`, `-1.5e3`},
		{`"+1"`, `"+1"`},
		{`"NaN"`, `"NaN"`},
		{`"0x10"`, `"0x10"`},
		{`"true"`, `true`},
		{`"False"`, `false`},
		{`"null"`, `null`},
		{`"\"true\""`, `"true"`},
		{`"\"3\""`, `"3"`},
		{`"{\"a\": 1}"`, `{"a": 1}`},
		{`"[1, 2]"`, `[1, 2]`},
		{`"a \"quoted\" word"`, `"a \"quoted\" word"`},
		{`3`, `3`},
		{`true`, `true`},
		{`null`, `null`},
		{`{"k":"v"}`, `{"k":"v"}`},
	}
	for _, tc := range tests {
		got, err := patchValue(json.RawMessage(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("patchValue(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`"{"`, `"[1,"`, `"{a}"`} {
		if got, err := patchValue(json.RawMessage(bad)); err == nil {
			t.Errorf("patchValue(%s) = %s, want an error", bad, got)
		}
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern string
		sep     rune
		yes, no []string
	}{
		{"pods", '.', []string{"pods"}, []string{"pods.apps", "pod", "xpods"}},
		{"*", '.', []string{"pods", ""}, []string{"deployments.apps"}},
		{"*.apps", '.', []string{"deployments.apps"}, []string{"deployments.apps.x", "apps", "pods"}},
		{"*.*", '.', []string{"deployments.apps"}, []string{"pods", "ingresses.networking.k8s.io"}},
		{"**", '.', []string{"pods", "ingresses.networking.k8s.io"}, nil},
		{"*.k8s.io", '.', []string{"x.k8s.io"}, []string{"x.networking.k8s.io"}},
		{"**.k8s.io", '.', []string{"x.k8s.io", "x.networking.k8s.io"}, []string{"k8s.io.x"}},
		{"pod?", '.', []string{"pods"}, []string{"pod", "pod.", "podss"}},
		{"[dp]ods", '.', []string{"pods", "dods"}, []string{"rods"}},
		{"[!d]ods", '.', []string{"pods"}, []string{"dods"}},
		{"[a-c]x", 0, []string{"bx"}, []string{"dx"}},
		{"{pods,services}", '.', []string{"pods", "services"}, []string{"pods,services", "nodes"}},
		{"{*.apps,pods}", '.', []string{"pods", "x.apps"}, []string{"x.y.apps"}},
		{`a\*b`, 0, []string{"a*b"}, []string{"axb"}},
		{"a.b", 0, []string{"a.b"}, []string{"axb"}},
		{"team-*", 0, []string{"team-a", "team-a.b"}, []string{"teams"}},
		{"(x)+", 0, []string{"(x)+"}, []string{"x", "xx"}},
	}
	for _, tc := range tests {
		re, err := compileGlob(tc.pattern, tc.sep)
		if err != nil {
			t.Errorf("compileGlob(%q): %v", tc.pattern, err)
			continue
		}
		for _, s := range tc.yes {
			if !re.MatchString(s) {
				t.Errorf("%q does not match %q", tc.pattern, s)
			}
		}
		for _, s := range tc.no {
			if re.MatchString(s) {
				t.Errorf("%q matches %q", tc.pattern, s)
			}
		}
	}
	for _, bad := range []string{"[a", "[]", "{a", `a\`, "[z-a]"} {
		if _, err := compileGlob(bad, '.'); err == nil {
			t.Errorf("compileGlob(%q) accepted", bad)
		}
	}
}

// FuzzParse feeds arbitrary files to Parse, which must return rules or an
// error and never panic; rules it accepts are applied to sample objects,
// which must either succeed or fail leaving the object unchanged.
func FuzzParse(f *testing.F) {
	seeds := []string{
		``,
		`version: v1`,
		"version: v1\nresourceModifierRules: []\n",
		`
version: v1
resourceModifierRules:
- conditions:
    groupResource: persistentvolumeclaims
    resourceNameRegex: "^mysql.*$"
    namespaces: [bar, foo]
    labelSelector:
      matchLabels: {foo: bar}
    matches:
    - {path: /spec/storageClassName, value: standard}
  patches:
  - {operation: replace, path: /spec/storageClassName, value: premium}
  - {operation: remove, path: /metadata/labels/test}
`,
		`
version: v1
resourceModifierRules:
- conditions: {groupResource: "**"}
  patches:
  - {operation: test, path: /spec/replicas, value: "3"}
  - {operation: copy, from: /metadata/name, path: /metadata/labels/n}
  mergePatches:
  - patchData: '{"metadata": {"annotations": {"foo": null}}}'
  strategicPatches:
  - patchData: |
      spec:
        template:
          spec:
            containers:
            - name: nginx
              image: repo2/nginx
            - $patch: delete
              name: sidecar
`,
		`
version: v1
resourceModifierRules:
- conditions: {groupResource: "{*.apps,widgets.example.com}", namespaces: ["s*"]}
  strategicPatches:
  - patchData: '{"spec": {"$setElementOrder/items": [{"name": "b"}], "items": {"$patch": "replace"}}}'
  - patchData: '{"$retainKeys": ["spec"], "spec": {"$patch": "delete"}}'
`,
		"version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods}\n  patches: [{operation: replace, path: spec/x}]\n",
		"version: v1\nresourceModifierRules:\n- conditions: {groupResource: \"[a\"}\n",
		"version: v2\n",
		"version: v1\nresourceModifierRules:\n- \n",
		"version: v1\nresourceModifierRules:\n- conditions: {groupResource: pods, labelSelector: {matchExpressions: [{key: a, operator: Near}]}}\n  patches: [{operation: remove, path: /a}]\n",
		"{version: v1, resourceModifierRules: [{conditions: {groupResource: '*'}, mergePatches: [{patchData: '[1]'}]}]}",
		"- [",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	samples := []struct{ y, gr string }{
		{deployYAML, "deployments.apps"},
		{widgetYAML, "widgets.example.com"},
		{pvcYAML, "persistentvolumeclaims"},
		{namespaceYAML, "namespaces"},
	}
	objs := make([]*unstructured.Unstructured, len(samples))
	for i, s := range samples {
		objs[i] = object(f, s.y)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "resource modifiers: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		if r.Len() == 0 {
			t.Fatal("no rules and no error")
		}
		for i, o := range objs {
			u := o.DeepCopy()
			if _, err := r.Apply(u, samples[i].gr); err != nil {
				if !reflect.DeepEqual(u.Object, o.Object) {
					t.Fatalf("Apply failed (%v) but changed the object", err)
				}
				continue
			}
			if u.GetKind() == "" {
				t.Fatal("Apply succeeded with an object without kind")
			}
		}
	})
}

// TestApplyConcurrent applies one Rules from many goroutines (run with
// -race): Rules holds no state that Apply changes.
func TestApplyConcurrent(t *testing.T) {
	r, err := Parse([]byte(`
version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps, matches: [{path: /spec/replicas, value: 3}]}
  patches:
  - {operation: add, path: /spec/template/spec/containers/-, value: {name: extra, image: x}}
  - {operation: add, path: /spec/template/spec/containers/2/args, value: [a]}
  mergePatches:
  - patchData: '{"metadata": {"annotations": {"a": "b"}}}'
  strategicPatches:
  - patchData: '{"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "repo2/nginx"}]}}}}'
`))
	if err != nil {
		t.Fatal(err)
	}
	base := object(t, deployYAML)
	want := base.DeepCopy()
	if _, err := r.Apply(want, "deployments.apps"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for range 8 {
		go func() {
			for range 20 {
				u := base.DeepCopy()
				if _, err := r.Apply(u, "deployments.apps"); err != nil {
					done <- err
					return
				}
				if !reflect.DeepEqual(u.Object, want.Object) {
					done <- errors.New("different result")
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
