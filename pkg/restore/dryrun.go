package restore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aymanbagabas/go-udiff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
)

// dryRunAll is the API server's dry-run mode: admission and validation
// run in full, nothing is persisted.
var dryRunAll = []string{metav1.DryRunAll}

// dryRun decides what applying u would do, writing nothing: an object
// the target lacks is sent as a server-side dry-run CREATE (so validation,
// admission and quota errors show now); one it has is compared, and under
// policy update sent as a dry-run UPDATE, with a unified diff.
func (a *applier) dryRun(ctx context.Context, it *Item, res kube.Resource, u *unstructured.Unstructured, changes []string) report.Result {
	var client dynamic.ResourceInterface = a.cluster.Dynamic.Resource(res.GroupVersionResource)
	if res.Namespaced {
		client = a.cluster.Dynamic.Resource(res.GroupVersionResource).Namespace(u.GetNamespace())
	}
	out := report.Result{Version: res.Version, Changes: changes}
	cur, err := client.Get(ctx, u.GetName(), metav1.GetOptions{})
	switch {
	case err == nil:
		d := comparable(u)
		if same, _ := contains(liveForCompare(cur).Object, d.Object, ""); same {
			out.Outcome, out.Reason = report.Unchanged, "exists, same"
			return out
		}
		merged := replacement(cur, u)
		out.Diff = diff(cur, merged)
		if a.opts.Spec.ExistingResourcePolicy != v1alpha1.PolicyUpdate {
			out.Outcome, out.Reason = report.Skipped, "exists, differs"
			return out
		}
		merged.SetResourceVersion(cur.GetResourceVersion())
		if _, err := client.Update(ctx, merged, metav1.UpdateOptions{DryRun: dryRunAll}); err != nil {
			out.Outcome, out.Reason, out.Message = report.Failed, string(apierrors.ReasonForError(err)), "update: "+err.Error()
			return out
		}
		out.Outcome = report.Updated
		return out
	case !apierrors.IsNotFound(err):
		out.Outcome, out.Reason, out.Message = report.Failed, string(apierrors.ReasonForError(err)), err.Error()
		return out
	}
	if res.Namespaced && !a.namespaceExists(ctx, u.GetNamespace()) {
		out.Outcome, out.Reason, out.Message = report.Created, "not validated", "namespace "+u.GetNamespace()+" is created by this restore"
		return out
	}
	if _, err := client.Create(ctx, u, metav1.CreateOptions{DryRun: dryRunAll}); err != nil {
		if it.GroupResource == "services" && isPortAllocated(err) {
			out.Outcome, out.Message = report.Created, "node ports already allocated in the target: new ones would be allocated"
			return out
		}
		out.Outcome, out.Reason, out.Message = report.Failed, string(apierrors.ReasonForError(err)), err.Error()
		return out
	}
	out.Outcome = report.Created
	return out
}

// namespaceExists reports whether the target has namespace ns.
func (a *applier) namespaceExists(ctx context.Context, ns string) bool {
	if _, ok := a.namespaces.Load(ns); ok {
		return true
	}
	_, err := a.cluster.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, ns, metav1.GetOptions{})
	if err == nil {
		a.namespaces.Store(ns, true)
	}
	return err == nil
}

// crdInPlan reports whether the plan restores the CRD of group/resource.
func (p *Plan) crdInPlan(group, resource string) bool {
	for _, it := range p.Items {
		if it.GroupResource == "customresourcedefinitions.apiextensions.k8s.io" && it.Name == resource+"."+group && it.Skip == "" {
			return true
		}
	}
	return false
}

// diff renders a unified diff of two objects as YAML, without the fields
// the server keeps for itself. The values of a Secret's data and
// stringData never appear: each key shows "<redacted>", or, where the two
// sides differ, "<redacted: target value>" and "<redacted: backup value>".
func diff(from, to *unstructured.Unstructured) string {
	return diffAs("target", "restore", from, to)
}

// diffAs is diff with the two sides' names. Besides data and stringData,
// a Secret's kubectl.kubernetes.io/last-applied-configuration annotation
// (which kubectl apply fills with the whole Secret) is redacted the same way.
func diffAs(fromName, toName string, from, to *unstructured.Unstructured) string {
	if from.GetKind() == "Secret" || to.GetKind() == "Secret" {
		from, to = from.DeepCopy(), to.DeepCopy()
		for _, field := range []string{"data", "stringData"} {
			redactPair(from.Object, to.Object, field)
		}
		fa, fok := from.GetAnnotations()[lastApplied]
		ta, tok := to.GetAnnotations()[lastApplied]
		if fok {
			setAnnotation(from, lastApplied, redactedAs(fa, ta, tok, "target"))
		}
		if tok {
			setAnnotation(to, lastApplied, redactedAs(ta, fa, fok, "backup"))
		}
	}
	return udiff.Unified(fromName, toName, render(from), render(to))
}

// lastApplied is kubectl apply's annotation: it holds the whole object
// as applied, a Secret's values included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func redactedAs(v, other string, otherSet bool, side string) string {
	if otherSet && v == other {
		return "<redacted>"
	}
	return "<redacted: " + side + " value>"
}

func setAnnotation(u *unstructured.Unstructured, k, v string) {
	a := u.GetAnnotations()
	a[k] = v
	u.SetAnnotations(a)
}

// redactPair replaces the values of map field in a and b by markers that
// say only whether the two sides agree.
func redactPair(a, b map[string]any, field string) {
	am, _ := a[field].(map[string]any)
	bm, _ := b[field].(map[string]any)
	ra, rb := map[string]any{}, map[string]any{}
	for k, v := range am {
		if bv, ok := bm[k]; ok && fmt.Sprint(bv) == fmt.Sprint(v) {
			ra[k], rb[k] = "<redacted>", "<redacted>"
		} else {
			ra[k] = "<redacted: target value>"
		}
	}
	for k := range bm {
		if _, ok := rb[k]; !ok {
			rb[k] = "<redacted: backup value>"
		}
	}
	if am != nil {
		a[field] = ra
	}
	if bm != nil {
		b[field] = rb
	}
}

func render(u *unstructured.Unstructured) string {
	c := u.DeepCopy()
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	b, err := json.Marshal(c.Object)
	if err != nil {
		return fmt.Sprint(c.Object)
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		return string(b)
	}
	return string(y)
}

// legacyQuotaNames are the object-count quota keys that predate count/<resource>.
var legacyQuotaNames = map[string]string{
	"pods": "pods", "services": "services", "secrets": "secrets", "configmaps": "configmaps",
	"persistentvolumeclaims": "persistentvolumeclaims", "replicationcontrollers": "replicationcontrollers",
	"resourcequotas": "resourcequotas",
}

// checkQuotas finds what server-side dry runs cannot: each object was
// checked alone, so a namespace whose ResourceQuota fits each new object
// but not all of them passes. For every object-count quota (count/<gr> and
// the legacy names) it adds the objects the restore would create to the
// quota's current use, and marks those beyond its hard limit as failing.
func (a *applier) checkQuotas(ctx context.Context) {
	type key struct{ ns, gr string }
	planned := map[key][]int{}
	a.results.Update(func(items []report.Result) {
		for i, it := range items {
			if it.Outcome != report.Created {
				continue
			}
			ns := it.TargetNamespace
			if ns == "" {
				ns = it.Namespace
			}
			if ns != "" {
				planned[key{ns, it.Resource}] = append(planned[key{ns, it.Resource}], i)
			}
		}
	})
	seen := map[string]bool{}
	for k := range planned {
		if seen[k.ns] {
			continue
		}
		seen[k.ns] = true
		quotas, err := a.cluster.Typed.CoreV1().ResourceQuotas(k.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, q := range quotas.Items {
			for name, hard := range q.Status.Hard {
				gr, ok := legacyQuotaNames[string(name)]
				if !ok {
					after, isCount := strings.CutPrefix(string(name), "count/")
					if !isCount {
						continue
					}
					gr = after
				}
				idx := planned[key{k.ns, gr}]
				used := q.Status.Used[name]
				room := hard.Value() - used.Value()
				if int64(len(idx)) <= room {
					continue
				}
				a.results.Update(func(items []report.Result) {
					for _, i := range idx[max(room, 0):] {
						items[i].Outcome, items[i].Reason = report.Failed, "exceeded quota"
						items[i].Message = fmt.Sprintf("%s, %s: %d used + %d this restore creates > %d hard", q.Name, name, used.Value(), len(idx), hard.Value())
					}
				})
			}
		}
	}
}
