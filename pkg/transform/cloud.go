package transform

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubeferry/ferry/pkg/kube"
)

// profileFS holds the cloud profiles: data files, one per cloud, naming
// the annotations, node labels, storage provisioners and ingress class
// that belong to that cloud alone. Each file cites its sources.
//
//go:embed profiles/*.yaml
var profileFS embed.FS

// CloudProfile is one cloud's profile (profiles/<name>.yaml).
type CloudProfile struct {
	Name         string `json:"name"`
	LoadBalancer struct {
		// AnnotationPrefixes are the prefixes of the cloud's Service annotations.
		AnnotationPrefixes []string `json:"annotationPrefixes"`
		// Internal is the annotation (and value) that asks for an internal
		// load balancer; Value "" means the annotation's value is cloud data
		// (a subnet ID) that no other cloud can provide.
		Internal *struct {
			Annotation string `json:"annotation"`
			Value      string `json:"value"`
		} `json:"internal"`
	} `json:"loadBalancer"`
	// NodeLabelPrefixes are node label keys (prefixes) only this cloud sets.
	NodeLabelPrefixes []string `json:"nodeLabelPrefixes"`
	// StorageProvisioners are the cloud's volume provisioners, preferred first.
	StorageProvisioners []string `json:"storageProvisioners"`
	// IngressClass is the cloud's ingress class name.
	IngressClass string `json:"ingressClass"`
}

// CloudNames lists the known cloud profiles.
func CloudNames() []string {
	entries, _ := profileFS.ReadDir("profiles")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// LoadCloudProfile returns the profile called name; an unknown name is an
// error listing the known ones.
func LoadCloudProfile(name string) (*CloudProfile, error) {
	data, err := profileFS.ReadFile(path.Join("profiles", name+".yaml"))
	if err != nil || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("unknown cloud %q (known: %s)", name, strings.Join(CloudNames(), ", "))
	}
	p := &CloudProfile{}
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		return nil, fmt.Errorf("cloud profile %s: %w", name, err)
	}
	return p, nil
}

// CloudTranslation moves objects from one cloud's conventions to another's.
type CloudTranslation struct{ From, To *CloudProfile }

// NewCloudTranslation loads the two profiles; an empty name is "generic".
func NewCloudTranslation(from, to string) (*CloudTranslation, error) {
	if from == "" && to == "" {
		return nil, nil
	}
	if from == "" {
		from = "generic"
	}
	if to == "" {
		to = "generic"
	}
	f, err := LoadCloudProfile(from)
	if err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	t, err := LoadCloudProfile(to)
	if err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	return &CloudTranslation{From: f, To: t}, nil
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// legacyTopology maps deprecated topology label keys to the standard ones,
// which every cloud sets.
var legacyTopology = map[string]string{
	"failure-domain.beta.kubernetes.io/zone":   "topology.kubernetes.io/zone",
	"failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}

// Cloud translates what belongs to the source cloud (a restore's
// spec.fromCloud) into the target cloud's terms (spec.toCloud), per the profiles: load-balancer
// annotations of Services are dropped, the internal-load-balancer one
// translated; node selectors and node affinities on the source cloud's
// node labels are dropped (legacy zone keys become topology.kubernetes.io/*);
// StorageClasses get the target's provisioner (the source's parameters are
// dropped); Ingresses get the target's ingress class. Every change is a note.
func Cloud(c *Context, u *unstructured.Unstructured) []string {
	ct := c.Cloud
	if ct == nil {
		return nil
	}
	var notes []string
	switch u.GetKind() {
	case "Service":
		notes = append(notes, ct.service(u)...)
	case "StorageClass":
		notes = append(notes, ct.storageClass(u)...)
	case "Ingress":
		notes = append(notes, ct.ingress(u)...)
	}
	if p, ok := kube.PodSpecPathOf(u.GroupVersionKind().Group, u.GetKind()); ok {
		notes = append(notes, ct.podSpec(u, p)...)
	}
	return notes
}

func (ct *CloudTranslation) service(u *unstructured.Unstructured) []string {
	ann := u.GetAnnotations()
	if len(ann) == 0 {
		return nil
	}
	var notes []string
	internal := false
	if in := ct.From.LoadBalancer.Internal; in != nil {
		if v, ok := ann[in.Annotation]; ok && (in.Value == "" || strings.EqualFold(v, in.Value)) {
			internal = true
		}
	}
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if hasPrefix(k, ct.From.LoadBalancer.AnnotationPrefixes) {
			delete(ann, k)
			notes = append(notes, fmt.Sprintf("annotation %s dropped: it belongs to %s", k, ct.From.Name))
		}
	}
	if internal {
		switch in := ct.To.LoadBalancer.Internal; {
		case in != nil && in.Value != "":
			ann[in.Annotation] = in.Value
			notes = append(notes, fmt.Sprintf("internal load balancer: annotation %s=%s set for %s", in.Annotation, in.Value, ct.To.Name))
		case in != nil:
			notes = append(notes, fmt.Sprintf("internal load balancer: %s needs annotation %s with a value of its own (e.g. a subnet ID); set it by hand", ct.To.Name, in.Annotation))
		default:
			notes = append(notes, fmt.Sprintf("internal load balancer: %s has no annotation for it", ct.To.Name))
		}
	}
	if len(ann) == 0 {
		ann = nil
	}
	u.SetAnnotations(ann)
	return notes
}

func (ct *CloudTranslation) storageClass(u *unstructured.Unstructured) []string {
	prov, _, _ := unstructured.NestedString(u.Object, "provisioner")
	for _, p := range ct.From.StorageProvisioners {
		if prov != p {
			continue
		}
		if len(ct.To.StorageProvisioners) == 0 {
			return []string{fmt.Sprintf("provisioner %s of %s has no counterpart in %s: left as it is", prov, ct.From.Name, ct.To.Name)}
		}
		to := ct.To.StorageProvisioners[0]
		_ = unstructured.SetNestedField(u.Object, to, "provisioner")
		notes := []string{fmt.Sprintf("provisioner %s changed to %s", prov, to)}
		if params, ok, _ := unstructured.NestedStringMap(u.Object, "parameters"); ok && len(params) > 0 {
			keys := make([]string, 0, len(params))
			for k := range params {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			unstructured.RemoveNestedField(u.Object, "parameters")
			notes = append(notes, fmt.Sprintf("parameters %s dropped: they are %s's; set %s's by hand or with a resource modifier", strings.Join(keys, ","), ct.From.Name, ct.To.Name))
		}
		return notes
	}
	return nil
}

func (ct *CloudTranslation) ingress(u *unstructured.Unstructured) []string {
	if ct.From.IngressClass == "" {
		return nil
	}
	var notes []string
	if cls, _, _ := unstructured.NestedString(u.Object, "spec", "ingressClassName"); cls == ct.From.IngressClass {
		if ct.To.IngressClass != "" {
			_ = unstructured.SetNestedField(u.Object, ct.To.IngressClass, "spec", "ingressClassName")
		} else {
			unstructured.RemoveNestedField(u.Object, "spec", "ingressClassName")
		}
		notes = append(notes, fmt.Sprintf("ingressClassName %s changed to %q", cls, ct.To.IngressClass))
	}
	ann := u.GetAnnotations()
	if v, ok := ann["kubernetes.io/ingress.class"]; ok && v == ct.From.IngressClass {
		if ct.To.IngressClass != "" {
			ann["kubernetes.io/ingress.class"] = ct.To.IngressClass
		} else {
			delete(ann, "kubernetes.io/ingress.class")
		}
		u.SetAnnotations(ann)
		notes = append(notes, fmt.Sprintf("annotation kubernetes.io/ingress.class %s changed to %q", v, ct.To.IngressClass))
	}
	return notes
}

// podSpec drops node selectors and node-affinity expressions on the source
// cloud's node labels, and moves legacy zone keys to the standard ones.
func (ct *CloudTranslation) podSpec(u *unstructured.Unstructured, p []string) []string {
	spec, ok, _ := unstructured.NestedMap(u.Object, p...)
	if !ok {
		return nil
	}
	notes := ct.nodeSelector(spec)
	notes = append(notes, ct.nodeAffinity(spec)...)
	if len(notes) > 0 {
		_ = unstructured.SetNestedMap(u.Object, spec, p...)
	}
	return notes
}

// keyFate is what becomes of node label key k: its new key, and whether it
// is kept at all.
func (ct *CloudTranslation) keyFate(k string) (string, bool) {
	if std, ok := legacyTopology[k]; ok {
		return std, true
	}
	return k, !hasPrefix(k, ct.From.NodeLabelPrefixes)
}

// nodeSelector translates the nodeSelector of pod spec spec.
func (ct *CloudTranslation) nodeSelector(spec map[string]any) []string {
	sel, ok := spec["nodeSelector"].(map[string]any)
	if !ok {
		return nil
	}
	var notes []string
	for k, v := range sel {
		nk, keep := ct.keyFate(k)
		switch {
		case !keep:
			delete(sel, k)
			notes = append(notes, fmt.Sprintf("nodeSelector %s dropped: a %s node label", k, ct.From.Name))
		case nk != k:
			delete(sel, k)
			sel[nk] = v
			notes = append(notes, fmt.Sprintf("nodeSelector %s renamed %s", k, nk))
		}
	}
	if len(sel) == 0 {
		delete(spec, "nodeSelector")
	}
	return notes
}

// matchExpressions translates the node selector requirements of a
// matchExpressions list, in place, adding to notes.
func (ct *CloudTranslation) matchExpressions(list []any, notes *[]string) []any {
	kept := list[:0]
	for _, e := range list {
		m, _ := e.(map[string]any)
		k, _ := m["key"].(string)
		nk, keep := ct.keyFate(k)
		if !keep {
			*notes = append(*notes, fmt.Sprintf("node affinity on %s dropped: a %s node label", k, ct.From.Name))
			continue
		}
		if nk != k {
			m["key"] = nk
			*notes = append(*notes, fmt.Sprintf("node affinity key %s renamed %s", k, nk))
		}
		kept = append(kept, e)
	}
	return kept
}

// nodeAffinity translates the required and preferred node affinity of pod
// spec spec, dropping terms and fields left empty.
func (ct *CloudTranslation) nodeAffinity(spec map[string]any) []string {
	na, ok, _ := unstructured.NestedMap(spec, "affinity", "nodeAffinity")
	if !ok {
		return nil
	}
	var notes []string
	exprs := func(m map[string]any) {
		if l, ok := m["matchExpressions"].([]any); ok {
			if m["matchExpressions"] = ct.matchExpressions(l, &notes); len(m["matchExpressions"].([]any)) == 0 {
				delete(m, "matchExpressions")
			}
		}
	}
	if terms, ok, _ := unstructured.NestedSlice(na, "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"); ok {
		kept := terms[:0]
		for _, t := range terms {
			tm, _ := t.(map[string]any)
			exprs(tm)
			if len(tm) > 0 {
				kept = append(kept, t)
			}
		}
		if len(kept) == 0 {
			delete(na, "requiredDuringSchedulingIgnoredDuringExecution")
		} else {
			_ = unstructured.SetNestedSlice(na, kept, "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
		}
	}
	if prefs, ok := na["preferredDuringSchedulingIgnoredDuringExecution"].([]any); ok {
		kept := prefs[:0]
		for _, pr := range prefs {
			pm, _ := pr.(map[string]any)
			pref, _ := pm["preference"].(map[string]any)
			exprs(pref)
			if len(pref) > 0 {
				kept = append(kept, pr)
			}
		}
		if len(kept) == 0 {
			delete(na, "preferredDuringSchedulingIgnoredDuringExecution")
		} else {
			na["preferredDuringSchedulingIgnoredDuringExecution"] = kept
		}
	}
	if len(na) == 0 {
		unstructured.RemoveNestedField(spec, "affinity", "nodeAffinity")
		if aff, _ := spec["affinity"].(map[string]any); len(aff) == 0 {
			delete(spec, "affinity")
		}
	} else {
		_ = unstructured.SetNestedMap(spec, na, "affinity", "nodeAffinity")
	}
	return notes
}

// profiles loads every cloud profile but generic.
func profiles() []*CloudProfile {
	var out []*CloudProfile
	for _, n := range CloudNames() {
		if n == "generic" {
			continue
		}
		if p, err := LoadCloudProfile(n); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// CloudOfServiceAnnotation names the cloud whose load-balancer
// annotation key is, or "" when it is no cloud's.
func CloudOfServiceAnnotation(key string) string {
	for _, p := range profiles() {
		if hasPrefix(key, p.LoadBalancer.AnnotationPrefixes) {
			return p.Name
		}
	}
	return ""
}

// CloudOfNodeLabels names the cloud whose node labels labels has, or "".
func CloudOfNodeLabels(labels map[string]string) string {
	for _, p := range profiles() {
		for k := range labels {
			if hasPrefix(k, p.NodeLabelPrefixes) {
				return p.Name
			}
		}
	}
	return ""
}
