package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodVolumeBackup asks the node agent on spec.node to back up one volume
// of one pod into the location's volume repository (the volume engine,
// pkg/volumes, owns what happens).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pvb,categories=ferry
// +kubebuilder:printcolumn:name="Backup",type=string,JSONPath=`.spec.backupName`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.pod.name`
// +kubebuilder:printcolumn:name="Volume",type=string,JSONPath=`.spec.volume`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodVolumeBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PodVolumeBackupSpec `json:"spec"`
	Status            PodVolumeStatus     `json:"status,omitempty"`
}

// PodReference names a pod.
type PodReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// +optional
	UID string `json:"uid,omitempty"`
}

// PodVolumeBackupSpec names the volume and the backup it belongs to.
type PodVolumeBackupSpec struct {
	Pod PodReference `json:"pod"`
	// Volume is the volume's name in the pod spec.
	// +kubebuilder:validation:MinLength=1
	Volume string `json:"volume"`
	// Node is the node the pod runs on; only that node's agent takes it.
	// +kubebuilder:validation:MinLength=1
	Node string `json:"node"`
	// +kubebuilder:validation:MinLength=1
	BackupName string `json:"backupName"`
	// +optional
	StorageLocationName string `json:"storageLocationName,omitempty"`
	// Identity names the data across backups, nodes and pod restarts
	// ("pvc/<namespace>/<claim>" or "pod/<namespace>/<pod>/<volume>"): the
	// snapshot's parent is the latest snapshot of the same identity.
	// +kubebuilder:validation:MinLength=1
	Identity string `json:"identity"`
	// ClaimName and PersistentVolumeName are set for a claim-backed
	// volume: the kubelet names its folder after the PersistentVolume.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// +optional
	PersistentVolumeName string `json:"persistentVolumeName,omitempty"`
}

// PodVolumeRestore asks the node agent on spec.node to restore one volume
// of one pod from a snapshot in the location's volume repository.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pvr,categories=ferry
// +kubebuilder:printcolumn:name="Restore",type=string,JSONPath=`.spec.restoreName`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.pod.name`
// +kubebuilder:printcolumn:name="Volume",type=string,JSONPath=`.spec.volume`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodVolumeRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PodVolumeRestoreSpec `json:"spec"`
	Status            PodVolumeStatus      `json:"status,omitempty"`
}

// PodVolumeRestoreSpec names the volume, the restore and the backup.
type PodVolumeRestoreSpec struct {
	Pod PodReference `json:"pod"`
	// +kubebuilder:validation:MinLength=1
	Volume string `json:"volume"`
	// +kubebuilder:validation:MinLength=1
	Node string `json:"node"`
	// +kubebuilder:validation:MinLength=1
	RestoreName string `json:"restoreName"`
	// +kubebuilder:validation:MinLength=1
	BackupName string `json:"backupName"`
	// SnapshotID is the volume repository's snapshot to restore.
	// +kubebuilder:validation:MinLength=1
	SnapshotID string `json:"snapshotID"`
	// +optional
	StorageLocationName string `json:"storageLocationName,omitempty"`
	// RestoreUID names the done-marker written into the volume once its
	// data is complete (<volume>/.ferry/<restoreUID>), the one the pod's
	// ferry-restore-wait init container waits for: the restore run's UID,
	// or an earlier restore's that left the pod waiting.
	// +kubebuilder:validation:MinLength=1
	RestoreUID string `json:"restoreUID"`
	// RunUID is the restore run's own UID when it differs from RestoreUID:
	// a volume already holding RestoreUID's marker was then filled by that
	// earlier restore, and is left alone (a skip, not a re-run).
	// +optional
	RunUID string `json:"runUID,omitempty"`
	// MarkerOnly: the volume mounts a claim whose data another
	// PodVolumeRestore of the same restore has written; only the
	// done-marker is written.
	// +optional
	MarkerOnly bool `json:"markerOnly,omitempty"`
	// ClaimName and PersistentVolumeName are set for a claim-backed
	// volume: the kubelet names its folder after the PersistentVolume.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// +optional
	PersistentVolumeName string `json:"persistentVolumeName,omitempty"`
}

// PodVolumeStatus is the outcome of a PodVolumeBackup or PodVolumeRestore.
type PodVolumeStatus struct {
	// +kubebuilder:validation:Enum=New;InProgress;Completed;Failed
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// SnapshotID is the snapshot written (backup) or read (restore).
	// +optional
	SnapshotID string `json:"snapshotID,omitempty"`
	// ParentSnapshotID is the earlier snapshot a backup reused unchanged
	// files from.
	// +optional
	ParentSnapshotID string `json:"parentSnapshotID,omitempty"`
	// BytesDone counts the bytes read (backup) or written (restore) so
	// far; Files the files. Once Completed they are the volume's totals.
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty"`
	// +optional
	Files int64 `json:"files,omitempty"`
	// BytesTotal is the volume's size when known (a restore: the snapshot's).
	// +optional
	BytesTotal int64 `json:"bytesTotal,omitempty"`
	// UploadedBytes (backup) counts the bytes written to the store after
	// deduplication; CachedFiles the files taken unchanged from the parent.
	// +optional
	UploadedBytes int64 `json:"uploadedBytes,omitempty"`
	// +optional
	CachedFiles int64 `json:"cachedFiles,omitempty"`
	// Path is the volume's folder on the node.
	// +optional
	Path string `json:"path,omitempty"`
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
}

// PodVolumeBackupList is a list of PodVolumeBackups.
//
// +kubebuilder:object:root=true
type PodVolumeBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodVolumeBackup `json:"items"`
}

// PodVolumeRestoreList is a list of PodVolumeRestores.
//
// +kubebuilder:object:root=true
type PodVolumeRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodVolumeRestore `json:"items"`
}
