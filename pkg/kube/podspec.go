package kube

// workload is a resource whose objects carry a pod spec, and where.
type workload struct {
	group, kind, resource string
	path                  []string
}

// workloads are the built-in resources with a pod spec.
var workloads = []workload{
	{"", "Pod", "pods", []string{"spec"}},
	{"", "ReplicationController", "replicationcontrollers", []string{"spec", "template", "spec"}},
	{"apps", "Deployment", "deployments", []string{"spec", "template", "spec"}},
	{"apps", "ReplicaSet", "replicasets", []string{"spec", "template", "spec"}},
	{"apps", "StatefulSet", "statefulsets", []string{"spec", "template", "spec"}},
	{"apps", "DaemonSet", "daemonsets", []string{"spec", "template", "spec"}},
	{"batch", "Job", "jobs", []string{"spec", "template", "spec"}},
	{"batch", "CronJob", "cronjobs", []string{"spec", "jobTemplate", "spec", "template", "spec"}},
}

// PodSpecPaths are where each workload resource (its group-resource:
// "deployments.apps") keeps its pod spec.
var PodSpecPaths = func() map[string][]string {
	m := map[string][]string{}
	for _, w := range workloads {
		gr := w.resource
		if w.group != "" {
			gr += "." + w.group
		}
		m[gr] = w.path
	}
	return m
}()

// podSpecPathsByKind are the same paths by "group/kind" ("apps/Deployment";
// the core group is "").
var podSpecPathsByKind = func() map[string][]string {
	m := map[string][]string{}
	for _, w := range workloads {
		m[w.group+"/"+w.kind] = w.path
	}
	return m
}()

// PodSpecPathOf returns the field path of the pod spec in an object of
// group and kind, and false for a kind that has no pod spec.
func PodSpecPathOf(group, kind string) ([]string, bool) {
	p, ok := podSpecPathsByKind[group+"/"+kind]
	return p, ok
}
