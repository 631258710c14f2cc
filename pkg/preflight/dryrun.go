package preflight

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/report"
)

// group gathers the objects of risks that say the same.
type group struct {
	sev       report.Severity
	what, fix string
	objects   []string
}

type groups struct {
	order []string
	m     map[string]*group
}

func (g *groups) add(sev report.Severity, what, fix, object string) {
	if g.m == nil {
		g.m = map[string]*group{}
	}
	k := string(sev) + "\x00" + what + "\x00" + fix
	if g.m[k] == nil {
		g.m[k] = &group{sev: sev, what: what, fix: fix}
		g.order = append(g.order, k)
	}
	g.m[k].objects = append(g.m[k].objects, object)
}

func (g *groups) flush(e *env, check string) {
	for _, k := range g.order {
		gr := g.m[k]
		e.add(gr.sev, check, gr.objects, gr.what, gr.fix)
	}
}

// checkDryRun turns the dry-run restore's results into risks: every
// object the target refuses is a blocker; an object the target has and
// that differs is a warning (it is kept as the target has it, or replaced
// under policy update); the restore's own warnings are notes. Objects
// that fail alike (one resource, one reason, the same message but for
// their names) are one risk.
func checkDryRun(_ context.Context, e *env) {
	var g groups
	update := e.o.Restore.Spec.ExistingResourcePolicy == v1alpha1.PolicyUpdate
	notValidated := map[string]int{}
	for _, it := range e.results.Items {
		ns, name := it.Namespace, it.Name
		if it.TargetNamespace != "" {
			ns = it.TargetNamespace
		}
		if it.TargetName != "" {
			name = it.TargetName
		}
		obj := objectName(it.Resource, ns, name)
		switch {
		case it.Outcome == report.Failed && it.Reason == "resource modifier":
			g.add(report.Blocker, "ferry's resource modifier cannot be applied to it, so it is not moved: "+it.Message,
				"fix the rule the message names in spec.resourceModifiers", obj)
		case it.Outcome == report.Failed:
			msg := strings.ReplaceAll(it.Message, `"`+name+`"`, "NAME")
			g.add(report.Blocker, fmt.Sprintf("the target refuses %s (%s): %s", it.Resource, orWord(it.Reason, "error"), msg),
				fixFor(it), obj)
		case it.Outcome == report.Skipped && it.Reason == "version not served":
			g.add(report.Blocker, "not moved: "+it.Message, "install the API (its CRD or aggregated API server) in the target first, or leave it out: spec.excludedResources "+it.Resource, obj)
		case it.Outcome == report.Skipped && it.Reason == "exists, differs":
			g.add(report.Warning, "exists in the target and differs from the source: the target's is kept (existing-resource policy none), so the move does not bring the source's",
				"spec.existingResourcePolicy update replaces it, or remove it from the target, or spec.excludedResources "+it.Resource, obj)
		case it.Outcome == report.Updated && update && it.Diff != "":
			g.add(report.Note, "exists in the target and differs: replaced by the source's (existing-resource policy update)", "", obj)
		case it.Reason == "not validated" && strings.HasPrefix(it.Message, "namespace "):
			notValidated[ns]++
		}
	}
	g.flush(e, "dry-run")
	if len(notValidated) > 0 {
		var objs []string
		total := 0
		for ns, n := range notValidated {
			objs = append(objs, "namespaces "+ns)
			total += n
		}
		e.add(report.Note, "dry-run", objs,
			fmt.Sprintf("%d object(s) in %d namespace(s) the move creates are not sent as dry-run creates (a namespaced create needs its namespace); the quota, pod security, scheduling and other checks still cover them", total, len(objs)), "")
	}
	for _, w := range e.results.Errors {
		e.add(report.Blocker, "dry-run", nil, "the restore reports: "+w, "")
	}
	for _, w := range e.results.Warnings {
		e.add(report.Note, "dry-run", nil, "the restore reports: "+w, "")
	}
}

// fixFor suggests the fix of an object the target refuses.
func fixFor(r report.Result) string {
	switch r.Reason {
	case "Forbidden":
		return "see the message: a quota, a PodSecurity level or a policy of the target; change the target, or the object with spec.resourceModifiers"
	case "Invalid":
		return "change the field the message names with spec.resourceModifiers, or spec.excludedResources " + r.Resource
	case "AlreadyExists", "Conflict":
		return "remove it from the target, or spec.existingResourcePolicy update"
	case "InternalError":
		return "an admission webhook of the target failed: see the webhook check"
	}
	return "spec.resourceModifiers, or spec.excludedResources " + r.Resource
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
