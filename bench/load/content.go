package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// namePrefix is the name prefix of each seeded kind (objectName).
var namePrefix = map[string]string{
	"widgets": "widget", "configmaps": "cm", "secrets": "secret", "deployments": "deploy", "services": "svc",
}

// nsName is the name of load namespace i.
func nsName(i int) string { return fmt.Sprintf("%s%03d", nsPrefix, i) }

// objectName is the name of seeded object i of resource (a key of
// namePrefix); it lives in namespace nsName(i % namespaces).
func objectName(resource string, i int) string {
	return fmt.Sprintf("%s-%05d", namePrefix[resource], i)
}

// contentFields are the fields compared between source and target, per
// kind: what the seed wrote (and the API server defaulted), not what
// either cluster's server or controllers keep for themselves.
var contentFields = map[string][][]string{
	"namespaces":  {{"metadata", "labels"}},
	"widgets":     {{"metadata", "labels"}, {"spec"}},
	"configmaps":  {{"metadata", "labels"}, {"data"}, {"binaryData"}},
	"secrets":     {{"metadata", "labels"}, {"type"}, {"data"}},
	"deployments": {{"metadata", "labels"}, {"spec"}},
	"services":    {{"metadata", "labels"}, {"spec"}},
}

// ContentCheck is the comparison of a sample of the seeded objects, each
// read from the source and from a restore's target.
type ContentCheck struct {
	// Every is the sampling step: objects 0, Every, 2×Every, ... of each
	// kind, and the namespaces with those indexes.
	Every int `json:"every"`
	// Sampled counts the compared objects per kind; Total is their sum.
	Sampled map[string]int `json:"sampled"`
	Total   int            `json:"total"`
	// Mismatches describes the first 20 objects that differ (or are
	// missing in the target); MismatchTotal counts all of them.
	Mismatches    []string `json:"mismatches,omitempty"`
	MismatchTotal int      `json:"mismatchTotal"`
}

// sampler picks the sampled objects of the seed and reads them from the
// source.
type sampler struct {
	src   dynamic.Interface
	seed  Seed
	every int
}

// sampleItem is one sampled object.
type sampleItem struct {
	kind      string
	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

func (s *sampler) items() []sampleItem {
	var out []sampleItem
	for _, k := range compared {
		if k.gvr == gvrNamespaces {
			for i := 0; i < s.seed.Namespaces; i += s.every {
				out = append(out, sampleItem{k.name, k.gvr, "", nsName(i)})
			}
			continue
		}
		for i := 0; i < s.seed.Objects[k.name]; i += s.every {
			out = append(out, sampleItem{k.name, k.gvr, nsName(i % s.seed.Namespaces), objectName(k.name, i)})
		}
	}
	return out
}

// check compares every sampled object in the source with the same object
// in the cluster at dst (contentFields). A missing or different object is
// a mismatch; failing to read the source is an error.
func (s *sampler) check(ctx context.Context, dst *rest.Config) (*ContentCheck, error) {
	dstDyn, err := dynamic.NewForConfig(dst)
	if err != nil {
		return nil, err
	}
	items := s.items()
	res := &ContentCheck{Every: s.every, Sampled: map[string]int{}, Total: len(items)}
	var mu sync.Mutex
	var mismatches []string
	err = parallel(ctx, 8, len(items), func(ctx context.Context, i int) error {
		it := items[i]
		a, err := s.src.Resource(it.gvr).Namespace(it.namespace).Get(ctx, it.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("source %s %s/%s: %w", it.kind, it.namespace, it.name, err)
		}
		var problems []string
		b, err := dstDyn.Resource(it.gvr).Namespace(it.namespace).Get(ctx, it.name, metav1.GetOptions{})
		if err != nil {
			problems = []string{err.Error()}
		} else {
			problems = compareContent(it.kind, a, b)
		}
		mu.Lock()
		defer mu.Unlock()
		res.Sampled[it.kind]++
		if len(problems) > 0 {
			mismatches = append(mismatches, fmt.Sprintf("%s %s/%s: %s", it.kind, it.namespace, it.name, strings.Join(problems, "; ")))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(mismatches)
	res.MismatchTotal = len(mismatches)
	res.Mismatches = mismatches[:min(20, len(mismatches))]
	return res, nil
}

// compareContent returns how target differs from source in kind's
// contentFields, after normalize.
func compareContent(kind string, source, target *unstructured.Unstructured) []string {
	a, b := normalize(kind, source), normalize(kind, target)
	var out []string
	for _, f := range contentFields[kind] {
		av, _, _ := unstructured.NestedFieldNoCopy(a.Object, f...)
		bv, _, _ := unstructured.NestedFieldNoCopy(b.Object, f...)
		if !apiequality.Semantic.DeepEqual(av, bv) {
			out = append(out, fmt.Sprintf(".%s differs (-source +target):\n%s", strings.Join(f, "."), diff.Diff(av, bv)))
		}
	}
	return out
}

// normalize returns a copy of u without what a restore changes by design:
// ferry's ferry.dev/backup and ferry.dev/restore labels, and a Service's
// cluster IPs, which each cluster allocates from its own range (a headless
// Service's "None" is kept and compared).
func normalize(kind string, u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	if l := u.GetLabels(); l != nil {
		delete(l, v1alpha1.LabelBackup)
		delete(l, v1alpha1.LabelRestore)
		u.SetLabels(l)
	}
	if kind == "services" {
		if ip, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP"); ip != "" && ip != "None" {
			_ = unstructured.SetNestedField(u.Object, "(allocated)", "spec", "clusterIP")
			_ = unstructured.SetNestedStringSlice(u.Object, []string{"(allocated)"}, "spec", "clusterIPs")
		}
	}
	return u
}
