package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/kubeferry/ferry/pkg/report"
)

// checkScheduling finds workloads whose pods no target node can take:
// their nodeSelector and required node affinity match no node, or every
// node that matches has a NoSchedule or NoExecute taint they do not
// tolerate (the scheduler's own helpers decide both). Their pods stay
// Pending: a blocker (a warning for a DaemonSet, which then runs
// nowhere). A target without nodes is one warning. PodDisruptionBudgets
// that no eviction can ever satisfy are warnings: node drains in the
// target hang on them.
func checkScheduling(_ context.Context, e *env) {
	checkDisruptionBudgets(e)
	if len(e.t.nodes) == 0 {
		if len(e.c.workloads) > 0 {
			e.add(report.Warning, "scheduling", []string{"nodes"}, fmt.Sprintf("the target has no nodes: none of the move's %d workload(s) will run until it has", len(e.c.workloads)), "add nodes to the target")
		}
		return
	}
	var g groups
	for _, w := range e.c.workloads {
		why := unschedulable(e, w)
		if why == "" {
			continue
		}
		sev := report.Blocker
		what := "its pods stay Pending: " + why
		if w.replicas == -1 {
			sev, what = report.Warning, "it runs on no node: "+why
		}
		if w.replicas == 0 {
			sev, what = report.Note, "scaled to 0 now; scaled up, "+what
		}
		g.add(sev, what, "spec.fromCloud and spec.toCloud translate the cloud's node labels; otherwise change the pods' nodeSelector, affinity or tolerations with spec.resourceModifiers, or label the target's nodes", w.objectName())
	}
	g.flush(e, "scheduling")
}

// unschedulable says why no target node can take w's pods, or "".
func unschedulable(e *env, w workload) string {
	pod := &corev1.Pod{Spec: w.spec}
	req := nodeaffinity.GetRequiredNodeAffinity(pod)
	matched, tainted := 0, map[string]int{}
	for i := range e.t.nodes {
		n := &e.t.nodes[i]
		if ok, _ := req.Match(n); !ok {
			continue
		}
		matched++
		taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, w.spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false)
		if !untolerated {
			return ""
		}
		tainted[taint.ToString()]++
	}
	if matched == 0 {
		return fmt.Sprintf("no node of the target's %d matches its %s", len(e.t.nodes), selectorString(w.spec))
	}
	var ts []string
	for t, n := range tainted {
		ts = append(ts, fmt.Sprintf("%s (%d)", t, n))
	}
	sort.Strings(ts)
	return fmt.Sprintf("the %d node(s) that match its %s have taints it does not tolerate: %s", matched, selectorString(w.spec), strings.Join(ts, ", "))
}

func selectorString(s corev1.PodSpec) string {
	var parts []string
	if len(s.NodeSelector) > 0 {
		parts = append(parts, "nodeSelector "+labels.SelectorFromSet(s.NodeSelector).String())
	}
	if a := s.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		var terms []string
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			var reqs []string
			for _, r := range t.MatchExpressions {
				reqs = append(reqs, fmt.Sprintf("%s %s %s", r.Key, r.Operator, strings.Join(r.Values, ",")))
			}
			for _, r := range t.MatchFields {
				reqs = append(reqs, fmt.Sprintf("%s %s %s", r.Key, r.Operator, strings.Join(r.Values, ",")))
			}
			terms = append(terms, strings.Join(reqs, " and "))
		}
		parts = append(parts, "required node affinity ("+strings.Join(terms, ") or (")+")")
	}
	if len(parts) == 0 {
		return "pod spec"
	}
	return strings.Join(parts, " and ")
}

// checkDisruptionBudgets finds the move's PodDisruptionBudgets that allow
// no eviction of the pods they select among the planned workloads:
// maxUnavailable 0, or minAvailable at least their replicas.
func checkDisruptionBudgets(e *env) {
	for _, pdb := range objectsOf[policyv1.PodDisruptionBudget](e.c, "policy/PodDisruptionBudget") {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		var replicas int64
		var objs []string
		for _, w := range e.c.workloads {
			if w.namespace != pdb.Namespace || w.replicas < 0 || w.kind == "Pod" || w.kind == "ReplicaSet" || w.kind == "Job" || w.kind == "CronJob" || !sel.Matches(labels.Set(w.meta.Labels)) {
				continue
			}
			replicas += w.replicas
			objs = append(objs, w.objectName())
		}
		if len(objs) == 0 || replicas == 0 {
			continue // no pod to evict
		}
		obj := objectName("poddisruptionbudgets.policy", pdb.Namespace, pdb.Name)
		never := ""
		switch {
		case pdb.Spec.MaxUnavailable != nil && isZero(*pdb.Spec.MaxUnavailable):
			never = "maxUnavailable " + pdb.Spec.MaxUnavailable.String()
		case pdb.Spec.MinAvailable != nil:
			min, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(replicas), true)
			if err == nil && int64(min) >= replicas {
				never = fmt.Sprintf("minAvailable %s of %d replica(s)", pdb.Spec.MinAvailable.String(), replicas)
			}
		}
		if never != "" {
			e.add(report.Warning, "scheduling", append([]string{obj}, objs...), fmt.Sprintf("allows no eviction (%s): draining or upgrading a target node that runs these pods hangs", never),
				"set maxUnavailable 1 (or minAvailable below the replicas) with spec.resourceModifiers, or scale the workload up")
		}
	}
}

func isZero(v intstr.IntOrString) bool {
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	return strings.TrimSuffix(v.StrVal, "%") == "0"
}
