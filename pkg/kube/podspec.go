package kube

// PodSpecPaths are where each workload resource (its group-resource:
// "deployments.apps") keeps its pod spec.
var PodSpecPaths = map[string][]string{
	"pods":                   {"spec"},
	"deployments.apps":       {"spec", "template", "spec"},
	"replicasets.apps":       {"spec", "template", "spec"},
	"statefulsets.apps":      {"spec", "template", "spec"},
	"daemonsets.apps":        {"spec", "template", "spec"},
	"jobs.batch":             {"spec", "template", "spec"},
	"cronjobs.batch":         {"spec", "jobTemplate", "spec", "template", "spec"},
	"replicationcontrollers": {"spec", "template", "spec"},
}
