package restore

// Tiers, in restore order (docs/design.md#restore-order, after Velero's default
// restore priorities, pkg/cmd/server/server.go defaultRestorePriorities).
// Objects of one tier are applied concurrently; a tier starts when the
// one before it is done. CRDs must be Established before anything else.
const (
	tierCRD = iota
	tierNamespace
	tierStorageClass
	tierPV
	tierPVC
	tierRBAC
	tierServiceAccount
	tierSecret
	tierConfigMap
	tierLimitRange
	tierPriorityClass
	tierRest
	tierWorkload
	tierService
	// tierAdmission holds admission webhooks and policies. They go last so
	// that a restored webhook whose backend is not running yet cannot
	// reject the restore of the objects it polices.
	tierAdmission
	numTiers
)

var tierNames = [numTiers]string{"CRDs", "Namespaces", "StorageClasses", "PersistentVolumes", "PersistentVolumeClaims",
	"RBAC", "ServiceAccounts", "Secrets", "ConfigMaps", "LimitRanges", "PriorityClasses", "other resources",
	"workloads", "Services", "admission webhooks and policies"}

var tierOf = map[string]int{
	"customresourcedefinitions.apiextensions.k8s.io": tierCRD,
	"namespaces":                                    tierNamespace,
	"storageclasses.storage.k8s.io":                 tierStorageClass,
	"persistentvolumes":                             tierPV,
	"persistentvolumeclaims":                        tierPVC,
	"clusterroles.rbac.authorization.k8s.io":        tierRBAC,
	"clusterrolebindings.rbac.authorization.k8s.io": tierRBAC,
	"roles.rbac.authorization.k8s.io":               tierRBAC,
	"rolebindings.rbac.authorization.k8s.io":        tierRBAC,
	"serviceaccounts":                               tierServiceAccount,
	"secrets":                                       tierSecret,
	"configmaps":                                    tierConfigMap,
	"limitranges":                                   tierLimitRange,
	"priorityclasses.scheduling.k8s.io":             tierPriorityClass,
	"deployments.apps":                              tierWorkload,
	"replicasets.apps":                              tierWorkload,
	"statefulsets.apps":                             tierWorkload,
	"daemonsets.apps":                               tierWorkload,
	"jobs.batch":                                    tierWorkload,
	"cronjobs.batch":                                tierWorkload,
	"replicationcontrollers":                        tierWorkload,
	"pods":                                          tierWorkload,
	"services":                                      tierService,
	"mutatingwebhookconfigurations.admissionregistration.k8s.io":     tierAdmission,
	"validatingwebhookconfigurations.admissionregistration.k8s.io":   tierAdmission,
	"validatingadmissionpolicies.admissionregistration.k8s.io":       tierAdmission,
	"validatingadmissionpolicybindings.admissionregistration.k8s.io": tierAdmission,
	"mutatingadmissionpolicies.admissionregistration.k8s.io":         tierAdmission,
	"mutatingadmissionpolicybindings.admissionregistration.k8s.io":   tierAdmission,
}

// tier returns the tier of group-resource gr.
func tier(gr string) int {
	if t, ok := tierOf[gr]; ok {
		return t
	}
	return tierRest
}

// neverRestored are group-resources that a restore never writes, with the
// reason (docs/design.md#left-to-controllers-and-never-restored; Velero's nonRestorableResources).
var neverRestored = map[string]string{
	"events":                                   "events are history, not state",
	"events.events.k8s.io":                     "events are history, not state",
	"nodes":                                    "nodes belong to the target's infrastructure",
	"leases.coordination.k8s.io":               "leases are held by running components of the source",
	"csinodes.storage.k8s.io":                  "CSINodes belong to the target's nodes",
	"volumeattachments.storage.k8s.io":         "volume attachments belong to the source's nodes",
	"componentstatuses":                        "not stored state",
	"ipaddresses.networking.k8s.io":            "ClusterIP allocations of the source; the target allocates its own",
	"tokenreviews.authentication.k8s.io":       "not stored state",
	"selfsubjectreviews.authentication.k8s.io": "not stored state",
	// ferry's own records (server mode): the target's server would take a
	// restored Backup or Restore, whose status is dropped, as a new one and
	// run it; the store, not the archive, carries backups to the target.
	"backups.ferry.dev":           "ferry's own records; store sync brings the backups",
	"restores.ferry.dev":          "ferry's own records of the source's restores",
	"podvolumebackups.ferry.dev":  "ferry's own records of the source's volume backups",
	"podvolumerestores.ferry.dev": "ferry's own records of the source's volume restores",
	// A restored Schedule would make the target's server back the target
	// up under the source's backup names, into the same store.
	"schedules.ferry.dev": "the source's backup schedule; create one in the target on purpose",
}
