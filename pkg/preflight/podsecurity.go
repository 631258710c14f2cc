package preflight

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// checkPodSecurity evaluates each planned workload's pods against the
// PodSecurity enforce level its namespace will have in the target (the
// target's labels where it has the namespace, else the restored
// namespace's), with the API server's own checks
// (k8s.io/pod-security-admission): pods that violate it are refused (a
// blocker; a Deployment is created, its pods never are). ferry's helper
// pods, which write the claims' data, are held against the same level.
func checkPodSecurity(_ context.Context, e *env) {
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		e.skip("pod security: %v", err)
		return
	}
	levels := map[string]psapi.LevelVersion{}
	level := func(ns string) (psapi.LevelVersion, bool) {
		if lv, ok := levels[ns]; ok {
			return lv, true
		}
		l, known := e.namespaceLabels(ns)
		if !known {
			return psapi.LevelVersion{}, false
		}
		p, errs := psapi.PolicyToEvaluate(l, psapi.Policy{Enforce: psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()}})
		if len(errs) > 0 {
			e.add(report.Warning, "pod-security", []string{objectName("namespaces", "", ns)}, "its PodSecurity labels do not parse: "+errs.ToAggregate().Error(), "fix the namespace's pod-security.kubernetes.io labels")
		}
		if p.Enforce.Version.Latest() {
			// "latest" is the target API server's own version of the
			// checks, not this library's.
			p.Enforce.Version = e.targetVersion()
		}
		levels[ns] = p.Enforce
		return p.Enforce, true
	}
	var g groups
	var pods []corev1.Pod
	owners := map[string]string{} // a pod's "namespace/name": its workload
	for _, w := range e.c.workloads {
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace, Name: w.name, Annotations: w.meta.Annotations}, Spec: w.spec})
		owners[w.namespace+"/"+w.name] = w.objectName()
		lv, ok := level(w.namespace)
		if !ok || lv.Level == psapi.LevelPrivileged {
			continue
		}
		agg := policy.AggregateCheckResults(ev.EvaluatePod(lv, &w.meta, &w.spec))
		if agg.Allowed {
			continue
		}
		sev, what := report.Blocker, "its pods are refused"
		if w.replicas == 0 {
			sev, what = report.Note, "scaled to 0 now; scaled up, its pods are refused"
		}
		g.add(sev, fmt.Sprintf("namespace %s enforces PodSecurity %q: %s: %s", w.namespace, lv.String(), what, agg.ForbiddenDetail()),
			fmt.Sprintf("label namespace %s pod-security.kubernetes.io/enforce with a level the pods meet in the target, or change the pods with spec.resourceModifiers", w.namespace), w.objectName())
	}
	g.flush(e, "pod-security")
	checkHelperPods(e, ev, level, pods, owners)
}

// targetVersion is the target API server's version as PodSecurity's
// checks take it (latest when it is not known).
func (e *env) targetVersion() psapi.Version {
	if c := e.t.cluster; c != nil && c.Version != nil {
		maj, err1 := strconv.Atoi(c.Version.Major)
		min, err2 := strconv.Atoi(strings.TrimSuffix(c.Version.Minor, "+"))
		if err1 == nil && err2 == nil {
			return psapi.MajorMinorVersion(maj, min)
		}
	}
	return psapi.LatestVersion()
}

// checkHelperPods holds ferry's helper pods against the level of each
// namespace whose volume data they write: a claim's helper runs as root
// with four file capabilities (within baseline), one for other volumes
// (emptyDir) mounts the node's pods directory (privileged only).
func checkHelperPods(e *env, ev policy.Evaluator, level func(string) (psapi.LevelVersion, bool), pods []corev1.Pod, owners map[string]string) {
	vols, _ := volumes.Select(pods, e.o.Backup.Spec.DefaultVolumesToFsBackup, true)
	if len(vols) > 0 && e.o.NoVolumeData != "" {
		var objs []string
		for _, v := range vols {
			objs = append(objs, owners[v.Namespace+"/"+v.Pod]+" volume "+v.Volume)
		}
		e.add(report.Blocker, "pod-security", objs, fmt.Sprintf("%d pod volume(s) ask for their data to be moved (annotation or spec.defaultVolumesToFsBackup), but no volume data moves: %s; their data would not arrive", len(vols), e.o.NoVolumeData),
			"give the repository password, or leave those volumes out")
		return
	}
	if !e.o.VolumeData {
		return
	}
	type need struct{ claim, host []string }
	byNS := map[string]*need{}
	for _, v := range vols {
		if byNS[v.Namespace] == nil {
			byNS[v.Namespace] = &need{}
		}
		if v.ClaimName != "" {
			byNS[v.Namespace].claim = append(byNS[v.Namespace].claim, objectName("persistentvolumeclaims", v.Namespace, v.ClaimName))
		} else {
			byNS[v.Namespace].host = append(byNS[v.Namespace].host, owners[v.Namespace+"/"+v.Pod]+" volume "+v.Volume)
		}
	}
	nss := make([]string, 0, len(byNS))
	for ns := range byNS {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for _, ns := range nss {
		lv, ok := level(ns)
		if !ok || lv.Level == psapi.LevelPrivileged {
			continue
		}
		for _, kind := range []struct {
			claim bool
			objs  []string
		}{{true, byNS[ns].claim}, {false, byNS[ns].host}} {
			if len(kind.objs) == 0 {
				continue
			}
			spec := helperpod.PodSpecFor(e.o.HelperImage, kind.claim)
			agg := policy.AggregateCheckResults(ev.EvaluatePod(lv, &metav1.ObjectMeta{Namespace: ns}, &spec))
			if agg.Allowed {
				continue
			}
			e.add(report.Blocker, "pod-security", kind.objs, fmt.Sprintf("namespace %s enforces PodSecurity %q, which refuses ferry's helper pods that write this volume data (%s): the data is not moved", ns, lv.String(), agg.ForbiddenDetail()),
				fmt.Sprintf("label namespace %s pod-security.kubernetes.io/enforce=%s for the move", ns, map[bool]string{true: "baseline", false: "privileged"}[kind.claim]))
		}
	}
}
