package modifiers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Version is the only version of the file format.
const Version = "v1"

// The file is decoded one level at a time, each level strictly, so that an
// error can name the rule and the field it is about. Field names and the
// decoding (sigs.k8s.io/yaml, case-insensitive keys, scalars accepted for
// strings) are Velero's.

type fileSpec struct {
	Version               string            `json:"version"`
	ResourceModifierRules []json.RawMessage `json:"resourceModifierRules"`
}

type ruleSpec struct {
	Conditions       json.RawMessage   `json:"conditions"`
	Patches          []json.RawMessage `json:"patches,omitempty"`
	MergePatches     []json.RawMessage `json:"mergePatches,omitempty"`
	StrategicPatches []json.RawMessage `json:"strategicPatches,omitempty"`
}

type conditionsSpec struct {
	Namespaces        []string          `json:"namespaces,omitempty"`
	GroupResource     string            `json:"groupResource"`
	ResourceNameRegex string            `json:"resourceNameRegex,omitempty"`
	LabelSelector     json.RawMessage   `json:"labelSelector,omitempty"`
	Matches           []json.RawMessage `json:"matches,omitempty"`
}

type matchSpec struct {
	Path  string          `json:"path,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

type jsonPatchSpec struct {
	Operation string          `json:"operation"`
	From      string          `json:"from,omitempty"`
	Path      string          `json:"path"`
	Value     json.RawMessage `json:"value,omitempty"`
}

type patchDataSpec struct {
	PatchData string `json:"patchData,omitempty"`
}

// Parse parses and validates a resource-modifiers file (see the package
// documentation for the format). Everything is checked here, so that Apply
// can only fail on a patch that does not fit an object.
//
// Errors start with "resource modifiers: " and name the rule (1-based) and
// the field, for example
//
//	resource modifiers: rule 2: patches[0].path "spec/x": must start with "/"
//
// Parse rejects invalid YAML, duplicate and unknown fields, a version
// other than "v1", an empty rule list, a rule without patches, an empty
// or invalid groupResource or namespace glob, an invalid
// resourceNameRegex or labelSelector, a path that is not a JSON pointer, an
// operation other than add, remove, replace, move, copy and test, a move
// or copy without "from", a value that starts like JSON but is not, and
// patchData that is not a JSON or YAML object.
func Parse(data []byte) (*Rules, error) {
	r, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("resource modifiers: %w", err)
	}
	return r, nil
}

// Load reads the resource-modifiers file at path and parses it with Parse.
// Errors name the file: "resource modifiers: mods.yaml: rule 1: ...".
func Load(path string) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("resource modifiers: %w", err)
	}
	r, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("resource modifiers: %s: %w", path, err)
	}
	return r, nil
}

func parse(data []byte) (*Rules, error) {
	var f fileSpec
	if err := decodeStrict(data, &f); err != nil {
		return nil, err
	}
	if !strings.EqualFold(f.Version, Version) {
		return nil, fmt.Errorf("version %q: not supported (want %q)", f.Version, Version)
	}
	if len(f.ResourceModifierRules) == 0 {
		return nil, errors.New("resourceModifierRules: must not be empty")
	}
	r := &Rules{rules: make([]rule, 0, len(f.ResourceModifierRules))}
	for i, raw := range f.ResourceModifierRules {
		ru, err := parseRule(raw)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i+1, err)
		}
		ru.index = i + 1
		r.rules = append(r.rules, ru)
	}
	return r, nil
}

func parseRule(raw json.RawMessage) (rule, error) {
	var ru rule
	var rs ruleSpec
	if isNull(raw) {
		return ru, errors.New("must be a mapping, not empty")
	}
	if err := decodeStrict(raw, &rs); err != nil {
		return ru, err
	}
	if err := ru.parseConditions(rs.Conditions); err != nil {
		return ru, err
	}
	for j, p := range rs.Patches {
		op, err := parseJSONPatch(p)
		if err != nil {
			return ru, fmt.Errorf("patches[%d]%w", j, err)
		}
		ru.patches = append(ru.patches, op)
	}
	for j, p := range rs.MergePatches {
		b, err := parsePatchData(p)
		if err != nil {
			return ru, fmt.Errorf("mergePatches[%d]%w", j, err)
		}
		ru.mergePatches = append(ru.mergePatches, b)
	}
	for j, p := range rs.StrategicPatches {
		b, err := parsePatchData(p)
		if err != nil {
			return ru, fmt.Errorf("strategicPatches[%d]%w", j, err)
		}
		ru.strategicPatches = append(ru.strategicPatches, b)
	}
	if len(ru.patches)+len(ru.mergePatches)+len(ru.strategicPatches) == 0 {
		return ru, errors.New("no patches: set at least one of patches, mergePatches and strategicPatches")
	}
	return ru, nil
}

func (ru *rule) parseConditions(raw json.RawMessage) error {
	var c conditionsSpec
	if !isNull(raw) {
		if err := decodeStrict(raw, &c); err != nil {
			return fmt.Errorf("conditions: %w", err)
		}
	}
	if c.GroupResource == "" {
		return errors.New("conditions.groupResource: must not be empty")
	}
	g, err := compileGlob(c.GroupResource, '.')
	if err != nil {
		return fmt.Errorf("conditions.groupResource %q: %w", c.GroupResource, err)
	}
	ru.groupResource = g
	if c.ResourceNameRegex != "" {
		re, err := regexp.Compile(c.ResourceNameRegex)
		if err != nil {
			return fmt.Errorf("conditions.resourceNameRegex %q: %w", c.ResourceNameRegex, err)
		}
		ru.nameRegex = re
	}
	all := len(c.Namespaces) == 0
	for j, ns := range c.Namespaces {
		if ns == "" {
			return fmt.Errorf("conditions.namespaces[%d]: must not be empty", j)
		}
		g, err := compileGlob(ns, 0)
		if err != nil {
			return fmt.Errorf("conditions.namespaces[%d] %q: %w", j, ns, err)
		}
		if ns == "*" {
			all = true
		}
		ru.namespaces = append(ru.namespaces, g)
	}
	if all {
		ru.namespaces = nil
	}
	if !isNull(c.LabelSelector) {
		var ls metav1.LabelSelector
		if err := decodeStrict(c.LabelSelector, &ls); err != nil {
			return fmt.Errorf("conditions.labelSelector: %w", err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil {
			return fmt.Errorf("conditions.labelSelector: %w", err)
		}
		ru.selector = sel
	}
	for j, raw := range c.Matches {
		var m matchSpec
		if isNull(raw) {
			return fmt.Errorf("conditions.matches[%d]: must be a mapping, not empty", j)
		}
		if err := decodeStrict(raw, &m); err != nil {
			return fmt.Errorf("conditions.matches[%d]: %w", j, err)
		}
		tokens, err := parsePointer(m.Path)
		if err != nil {
			return fmt.Errorf("conditions.matches[%d].path %q: %w", j, m.Path, err)
		}
		v, err := patchValue(m.Value)
		if err != nil {
			return fmt.Errorf("conditions.matches[%d].value: %w", j, err)
		}
		want, err := decodeGeneric(v)
		if err != nil {
			return fmt.Errorf("conditions.matches[%d].value: %w", j, err)
		}
		ru.matches = append(ru.matches, matchRule{tokens: tokens, value: want})
	}
	return nil
}

// parseJSONPatch validates one JSON patch operation. Its errors start with
// ".field" or ": ", to follow "patches[j]".
func parseJSONPatch(raw json.RawMessage) (jsonOp, error) {
	var op jsonOp
	var s jsonPatchSpec
	if isNull(raw) {
		return op, errors.New(": must be a mapping, not empty")
	}
	if err := decodeStrict(raw, &s); err != nil {
		return op, fmt.Errorf(": %w", err)
	}
	kind := strings.ToLower(s.Operation)
	switch kind {
	case "add", "remove", "replace", "move", "copy", "test":
	case "":
		return op, errors.New(".operation: must not be empty (want add, remove, replace, move, copy or test)")
	default:
		return op, fmt.Errorf(".operation %q: not one of add, remove, replace, move, copy and test", s.Operation)
	}
	if _, err := parsePointer(s.Path); err != nil {
		return op, fmt.Errorf(".path %q: %w", s.Path, err)
	}
	enc := map[string]any{"op": kind, "path": s.Path}
	switch kind {
	case "move", "copy":
		if s.From == "" {
			return op, fmt.Errorf(".from: required for %s", kind)
		}
		if _, err := parsePointer(s.From); err != nil {
			return op, fmt.Errorf(".from %q: %w", s.From, err)
		}
		enc["from"] = s.From
	case "add", "replace", "test":
		v, err := patchValue(s.Value)
		if err != nil {
			return op, fmt.Errorf(".value: %w", err)
		}
		enc["value"] = v
	}
	b, err := json.Marshal([]any{enc})
	if err != nil {
		return op, fmt.Errorf(": %w", err)
	}
	p, err := jsonpatch.DecodePatch(b)
	if err != nil {
		return op, fmt.Errorf(": %w", err)
	}
	return jsonOp{op: kind, path: s.Path, from: s.From, patch: p}, nil
}

// parsePatchData validates a mergePatches or strategicPatches entry and
// returns its patch as JSON. Its errors start with ".field" or ": ".
func parsePatchData(raw json.RawMessage) ([]byte, error) {
	var s patchDataSpec
	if isNull(raw) {
		return nil, errors.New(": must be a mapping, not empty")
	}
	if err := decodeStrict(raw, &s); err != nil {
		return nil, fmt.Errorf(": %w", err)
	}
	if strings.TrimSpace(s.PatchData) == "" {
		return nil, errors.New(".patchData: must not be empty")
	}
	b, err := yaml.YAMLToJSONStrict([]byte(s.PatchData))
	if err != nil {
		return nil, fmt.Errorf(".patchData: not valid JSON or YAML: %s", cleanError(err))
	}
	if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
		return nil, errors.New(".patchData: must be a JSON or YAML object")
	}
	return b, nil
}

// parsePointer checks an RFC 6901 JSON pointer (not the empty one, as
// Velero requires a path) and returns its reference tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, errors.New(`must not be empty (a JSON pointer such as "/spec/replicas")`)
	}
	if p[0] != '/' {
		return nil, errors.New(`must start with "/"`)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return nil, errors.New(`"~" must be followed by "0" or "1"`)
		}
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// patchValue returns the JSON a rule's value stands for, read as Velero
// reads it (see "Values" in the package documentation). raw is the value
// as the YAML decoder produced it, or empty if the value is missing.
func patchValue(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return json.RawMessage(`""`), nil
	}
	if raw[0] != '"' {
		// A YAML number, boolean, null, mapping or list: use it as it is.
		return raw, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	switch lower := strings.ToLower(s); {
	case s == "":
		return json.RawMessage(`""`), nil
	case strings.HasPrefix(s, `"`) && strings.HasSuffix(s, `"`):
		return json.Marshal(strings.TrimSuffix(strings.TrimPrefix(s, `"`), `"`))
	case s == "null":
		return json.RawMessage(`null`), nil
	case lower == "true" || lower == "false":
		return json.RawMessage(lower), nil
	case strings.HasPrefix(s, "{") || strings.HasPrefix(s, "["):
		if !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("%q starts like a JSON object or array but is not valid JSON (quote it as \"\\\"...\\\"\" for a string)", s)
		}
		return json.RawMessage(s), nil
	case isJSONNumber(s):
		return json.RawMessage(s), nil
	default:
		return json.Marshal(s)
	}
}

// isJSONNumber reports whether s is a finite number in JSON syntax.
func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return false
	}
	return json.Valid([]byte(s))
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// decodeStrict decodes YAML (or JSON) into v, rejecting duplicate and
// unknown fields, with readable errors.
func decodeStrict(data []byte, v any) error {
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		return cleanError(err)
	}
	return nil
}

// cleanError removes the decoders' prefixes and Go type names from err.
func cleanError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		where := ""
		if te.Field != "" {
			where = te.Field + ": "
		}
		return fmt.Errorf("%sgot %s, want %s", where, article(te.Value), typeName(te.Type))
	}
	msg := err.Error()
	for _, p := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	// yaml.v2 lists errors on indented lines: keep the message on one.
	msg = strings.ReplaceAll(msg, ":\n  ", ": ")
	msg = strings.ReplaceAll(msg, "\n  ", "; ")
	return errors.New(msg)
}

func typeName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		if t == reflect.TypeOf(json.RawMessage(nil)) {
			return "a value"
		}
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Bool:
		return "a boolean"
	case reflect.Pointer:
		return typeName(t.Elem())
	default:
		return "a " + t.Kind().String()
	}
}

func article(jsonType string) string {
	switch jsonType {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "a boolean"
	}
	return jsonType
}
