package v1alpha1

// The pod-volume handshake: how a restore marks a restored pod that must
// wait for its volume data, and what the writer of that data (the restore
// itself, a polling node agent, or a node agent through PodVolumeRestores)
// reads from the pod and writes back. The restore adds the init container
// RestoreWaitContainer, which mounts each such volume and waits until the
// done-marker <volume>/DoneMarkerDir/<restore UID> exists; the writer
// restores the data and then writes that marker.
const (
	// RestoreWaitContainer is the name of the init container a restore
	// adds to pods whose volume data it restores (Velero's restore-wait
	// approach).
	RestoreWaitContainer = "ferry-restore-wait"
	// DoneMarkerDir is the folder ferry keeps at the root of a restored
	// volume for its done-markers (DoneMarkerDir/<restore UID>). It is
	// never backed up.
	DoneMarkerDir = ".ferry"
)

// Annotations on a pod that waits for its volume data: what a node agent
// needs to restore it (pkg/nodeagent.PendingRestores).
const (
	AnnotationRestoreUID      = "ferry.dev/restore-uid"
	AnnotationRestoreBackup   = "ferry.dev/restore-backup"
	AnnotationSourceNamespace = "ferry.dev/source-namespace"
	AnnotationRestoreVolumes  = "ferry.dev/restore-volumes"
	// AnnotationRestoreVolumesBy says who writes the data: one of the
	// RestoreBy* values. Only pods marked RestoreByNodeAgent (or, from
	// before this annotation, unmarked) are taken by a polling node agent.
	AnnotationRestoreVolumesBy = "ferry.dev/restore-volumes-by"
)

// Values of AnnotationRestoreVolumesBy.
const (
	// RestoreByRestore: the restore process itself, on the node, writing
	// into the kubelet's pods directory (restore.PodVolumeOptions.HostPodsDir).
	RestoreByRestore = "restore"
	// RestoreByNodeAgent: a node agent polling for waiting pods
	// (restore.PodVolumeOptions.ByNodeAgent).
	RestoreByNodeAgent = "node-agent"
	// RestoreByPodVolumeRestore: the server, through PodVolumeRestore
	// objects that the node agent of the pod's node reconciles.
	RestoreByPodVolumeRestore = "PodVolumeRestore"
)

// Pod annotations that choose volumes for file-system backup, Velero's
// convention under ferry's domain: a comma-separated list of the pod's
// volume names.
const (
	AnnotationBackupVolumes  = "backup.ferry.dev/backup-volumes"
	AnnotationExcludeVolumes = "backup.ferry.dev/backup-volumes-excludes"
)

// Labels on PodVolumeBackups and PodVolumeRestores: the Backup or Restore
// they belong to (transform.LabelValue of its name: cut and hashed past
// 63 characters).
const (
	LabelPodVolumeBackup  = "ferry.dev/backup-name"
	LabelPodVolumeRestore = "ferry.dev/restore-name"
)
