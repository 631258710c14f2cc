package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kinds of server mode, served by the hub: each Backup and Restore
// names the member Cluster it acts on, and backups are kept in the hub's
// BackupStorageLocations. The hub's controllers carry them out against the
// member clusters, as `ferry backup create` and `ferry restore create` do,
// with nothing installed there but the helper pods that move volume data.

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// BackupStorageLocation is an object store the hub keeps backups in. The
// hub opens it with the keys of the Credential spec.credentialRef names,
// or else its own credentials (its environment, or workload identity),
// seals what it writes there when spec.encryption says so, and checks it
// every spec.validationFrequency (and when its Credentials change).
type BackupStorageLocation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BackupStorageLocationSpec   `json:"spec,omitempty"`
	Status BackupStorageLocationStatus `json:"status,omitempty"`
}

// BackupStorageLocationSpec names the object store.
type BackupStorageLocationSpec struct {
	// URL is the location as ferry opens it: s3://bucket?endpoint=...&region=...,
	// gs://bucket, azblob://container, or file:///dir (a directory the hub
	// can reach). Credentials never go in the URL.
	URL string `json:"url"`
	// Default marks the location of the namespace used by Backups that
	// name none. At most one location of a namespace is the default.
	// +optional
	Default bool `json:"default,omitempty"`
	// ValidationFrequency is how often the hub checks the location;
	// default 1m.
	// +optional
	ValidationFrequency *metav1.Duration `json:"validationFrequency,omitempty"`
	// CredentialRef names the Credential, in the location's namespace,
	// that holds its credentials (the keys of its scheme, as
	// AWS_ACCESS_KEY_ID); empty: the hub's own (its environment or
	// workload identity). The hub's checks, Backups, Restores and expiry
	// use them, and so do the helper pods that move volume data.
	// +optional
	CredentialRef *LocalObjectReference `json:"credentialRef,omitempty"`
	// Encryption encrypts the Backups written to the location for its
	// recipients, and reads them back with its identity.
	// +optional
	Encryption *Encryption `json:"encryption,omitempty"`
}

// LocationPhase says whether a location can be used: Available or
// Unavailable.
type LocationPhase string

// Location phases.
const (
	LocationAvailable   LocationPhase = "Available"
	LocationUnavailable LocationPhase = "Unavailable"
)

// LocationConditionAvailable is the BackupStorageLocation condition that
// is True when the hub last opened and listed the location.
const LocationConditionAvailable = "Available"

// BackupStorageLocationStatus is the result of the location's last check.
type BackupStorageLocationStatus struct {
	// +optional
	Phase LocationPhase `json:"phase,omitempty"`
	// Message says why the location is Unavailable.
	// +optional
	Message string `json:"message,omitempty"`
	// LastValidationTime is when the hub last checked the location.
	// +optional
	LastValidationTime *metav1.Time `json:"lastValidationTime,omitempty"`
	// ObservedGeneration is the generation of the spec last checked.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Available.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// BackupStorageLocationList is a list of BackupStorageLocations.
type BackupStorageLocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []BackupStorageLocation `json:"items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Backup is one backup of a member cluster into a BackupStorageLocation,
// as `ferry backup create` makes it. The hub runs each new one once.
type Backup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BackupSpec   `json:"spec,omitempty"`
	Status BackupStatus `json:"status,omitempty"`
}

// BackupSpec is which cluster is backed up, where to, and what of it, as
// ferry.dev/v1alpha1's BackupSpec of server mode says. Empty include
// lists mean all; namespace entries are globs; resource entries are
// resource names, optionally qualified by group ("deployments.apps").
type BackupSpec struct {
	// Cluster names the Cluster, in the Backup's namespace, backed up.
	Cluster string `json:"cluster"`
	// StorageLocationName names the BackupStorageLocation, in the Backup's
	// namespace, written to; empty: the namespace's default location.
	// +optional
	StorageLocationName string `json:"storageLocationName,omitempty"`
	// IncludedNamespaces are the namespaces selected (globs such as "shop-*"); empty: all.
	// +optional
	IncludedNamespaces []string `json:"includedNamespaces,omitempty"`
	// ExcludedNamespaces are namespaces left out (globs), even when included.
	// +optional
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`
	// IncludedResources are the resources selected ("deployments", "deployments.apps", "*"); empty: all.
	// +optional
	IncludedResources []string `json:"includedResources,omitempty"`
	// ExcludedResources are resources left out, even when included.
	// +optional
	ExcludedResources []string `json:"excludedResources,omitempty"`
	// LabelSelector is a label selector in kubectl syntax.
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
	// IncludeClusterResources is auto (default), true or false.
	// +optional
	IncludeClusterResources string `json:"includeClusterResources,omitempty"`
	// PreferredVersionOnly stores each resource at its preferred version
	// only, not at every version the cluster serves.
	// +optional
	PreferredVersionOnly bool `json:"preferredVersionOnly,omitempty"`
	// Images is what happens to the images the workloads name: none,
	// record (default), copy (to ImageRegistryMappings) or bundle (into
	// the location).
	// +optional
	Images string `json:"images,omitempty"`
	// ImageRegistryMappings are "old-host/ns=new-host/ns" entries.
	// +optional
	ImageRegistryMappings []string `json:"imageRegistryMappings,omitempty"`
	// ImagesRequired makes an image that fails fail the backup.
	// +optional
	ImagesRequired bool `json:"imagesRequired,omitempty"`
	// DefaultVolumesToFsBackup backs up the data of every pod volume, not
	// only of those named in a pod's backup.ferry.dev/backup-volumes.
	// +optional
	DefaultVolumesToFsBackup bool `json:"defaultVolumesToFsBackup,omitempty"`
	// TTL is how long the backup is kept: after status.startTimestamp +
	// TTL the hub deletes it from the location and the hub. Empty or zero:
	// kept until deleted.
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// RunPhase is where a Backup or Restore is: New, InProgress, then one of
// Completed, PartiallyFailed, Failed.
type RunPhase string

// Backup and Restore phases.
const (
	RunNew             RunPhase = "New"
	RunInProgress      RunPhase = "InProgress"
	RunCompleted       RunPhase = "Completed"
	RunPartiallyFailed RunPhase = "PartiallyFailed"
	RunFailed          RunPhase = "Failed"
)

// ConditionSucceeded is the Backup and Restore condition set when one
// ends: True when Completed, False otherwise, with the reason.
const ConditionSucceeded = "Succeeded"

// BackupDataFinalizer is on every Backup: the hub removes it once the
// Backup's folder in its location is deleted (when it is this Backup's)
// and the volume snapshots no backup uses any more are pruned.
const BackupDataFinalizer = "ferry.dev/backup-data"

// BackupStatus is what the hub reports of a Backup.
type BackupStatus struct {
	// +optional
	Phase RunPhase `json:"phase,omitempty"`
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// Expiration is when the hub deletes the backup (startTimestamp +
	// spec.ttl); nil: never.
	// +optional
	Expiration *metav1.Time `json:"expiration,omitempty"`
	// StorageLocation is the URL of the location written to, resolved
	// from spec.storageLocationName when the backup started.
	// +optional
	StorageLocation string `json:"storageLocation,omitempty"`
	// +optional
	Progress BackupProgress `json:"progress,omitempty"`
	// +optional
	Warnings int64 `json:"warnings,omitempty"`
	// +optional
	Errors int64 `json:"errors,omitempty"`
	// FailureReason says why the backup failed.
	// +optional
	FailureReason string `json:"failureReason,omitempty"`
	// PodVolumes counts the pod volumes whose data was backed up.
	// +optional
	PodVolumes *PodVolumeCounts `json:"podVolumes,omitempty"`
	// Conditions: Succeeded, once the backup ended.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Lease is held by the hub process running the backup.
	// +optional
	Lease *Lease `json:"lease,omitempty"`
}

// BackupProgress counts a backup's items: TotalItems selected,
// ItemsBackedUp written into the archive.
type BackupProgress struct {
	// +optional
	TotalItems int64 `json:"totalItems,omitempty"`
	// +optional
	ItemsBackedUp int64 `json:"itemsBackedUp,omitempty"`
}

// PodVolumeCounts counts pod volumes by outcome, and their data.
type PodVolumeCounts struct {
	// +optional
	Total int64 `json:"total,omitempty"`
	// +optional
	Completed int64 `json:"completed,omitempty"`
	// +optional
	Failed int64 `json:"failed,omitempty"`
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// BackupList is a list of Backups.
type BackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Backup `json:"items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Restore is one restore of a hub Backup into a member cluster, as `ferry
// restore create` makes it. The hub runs each new one once.
type Restore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RestoreSpec   `json:"spec,omitempty"`
	Status RestoreStatus `json:"status,omitempty"`
}

// RestoreSpec is which Backup is restored, into which cluster, and how.
type RestoreSpec struct {
	// Cluster names the Cluster, in the Restore's namespace, restored into.
	Cluster string `json:"cluster"`
	// BackupName names the Backup, in the Restore's namespace, restored.
	// It must have Completed or PartiallyFailed.
	BackupName string `json:"backupName"`
	// IncludedNamespaces are the namespaces selected (globs such as "shop-*"); empty: all.
	// +optional
	IncludedNamespaces []string `json:"includedNamespaces,omitempty"`
	// ExcludedNamespaces are namespaces left out (globs), even when included.
	// +optional
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`
	// IncludedResources are the resources selected ("deployments", "deployments.apps", "*"); empty: all.
	// +optional
	IncludedResources []string `json:"includedResources,omitempty"`
	// ExcludedResources are resources left out, even when included.
	// +optional
	ExcludedResources []string `json:"excludedResources,omitempty"`
	// NamespaceMapping maps source namespaces to target ones.
	// +optional
	NamespaceMapping map[string]string `json:"namespaceMapping,omitempty"`
	// StorageClassMapping maps source storage classes to target ones.
	// +optional
	StorageClassMapping map[string]string `json:"storageClassMapping,omitempty"`
	// ExistingResourcePolicy is none (default: compare and report) or
	// update.
	// +optional
	ExistingResourcePolicy string `json:"existingResourcePolicy,omitempty"`
	// PreserveNodePorts keeps every node port of restored Services.
	// +optional
	PreserveNodePorts bool `json:"preserveNodePorts,omitempty"`
	// ImageRegistryMappings ("old-host/ns=new-host/ns") rewrite image
	// references, keeping the tag and pinning the recorded digest.
	// +optional
	ImageRegistryMappings []string `json:"imageRegistryMappings,omitempty"`
	// PushImages pushes the images a bundle backup holds to the
	// registries ImageRegistryMappings name, before any object is written.
	// +optional
	PushImages bool `json:"pushImages,omitempty"`
	// ImagesRequired makes an image that fails fail the restore.
	// +optional
	ImagesRequired bool `json:"imagesRequired,omitempty"`
	// FromCloud and ToCloud name the cloud profiles (alibaba, tencent,
	// aws, gcp, azure, generic) whose annotations are translated.
	// +optional
	FromCloud string `json:"fromCloud,omitempty"`
	// ToCloud names the cloud the target runs on, whose annotations the restore writes (see fromCloud).
	// +optional
	ToCloud string `json:"toCloud,omitempty"`
	// Verify compares, after the restore, every object of the backup with
	// the target (as a Migration's verify step) and keeps the report in
	// the location; status.verification counts what it found. A
	// difference it did not expect makes a Completed restore
	// PartiallyFailed.
	// +optional
	Verify bool `json:"verify,omitempty"`
}

// RestoreStatus is what the hub reports of a Restore.
type RestoreStatus struct {
	// +optional
	Phase RunPhase `json:"phase,omitempty"`
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// Progress counts items as they finish, while the restore runs.
	// +optional
	Progress RestoreProgress `json:"progress,omitempty"`
	// Counts counts the items by outcome, once the restore ended.
	// +optional
	Counts RestoreCounts `json:"counts,omitempty"`
	// +optional
	Warnings int64 `json:"warnings,omitempty"`
	// +optional
	Errors int64 `json:"errors,omitempty"`
	// FailureReason says why the restore failed.
	// +optional
	FailureReason string `json:"failureReason,omitempty"`
	// PodVolumes counts the pod volumes whose data was restored.
	// +optional
	PodVolumes *PodVolumeCounts `json:"podVolumes,omitempty"`
	// Verification counts what the verification spec.verify asked for
	// found.
	// +optional
	Verification *VerificationSummary `json:"verification,omitempty"`
	// Conditions: Succeeded, once the restore ended.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Lease is held by the hub process running the restore.
	// +optional
	Lease *Lease `json:"lease,omitempty"`
}

// VerificationSummary counts what a verification compared (its report's
// summary), and where its report is kept in the location.
type VerificationSummary struct {
	// Objects is how many objects of the backup were compared; Matched,
	// Differ, Missing and Failed count them by outcome.
	Objects int64 `json:"objects"`
	Matched int64 `json:"matched"`
	Differ  int64 `json:"differ"`
	Missing int64 `json:"missing"`
	Failed  int64 `json:"failed"`
	// Unexpected counts the differences the restore did not expect.
	Unexpected int64 `json:"unexpected"`
	// Report are the keys of the report (JSON, HTML) in the location.
	// +optional
	Report []string `json:"report,omitempty"`
	// Error says why the verification could not finish.
	// +optional
	Error string `json:"error,omitempty"`
}

// RestoreProgress counts a running restore's items: TotalItems planned,
// ItemsRestored finished (whatever their outcome).
type RestoreProgress struct {
	// +optional
	TotalItems int64 `json:"totalItems,omitempty"`
	// +optional
	ItemsRestored int64 `json:"itemsRestored,omitempty"`
}

// RestoreCounts counts a restore's items by outcome.
type RestoreCounts struct {
	// +optional
	Created int64 `json:"created,omitempty"`
	// +optional
	Updated int64 `json:"updated,omitempty"`
	// +optional
	Unchanged int64 `json:"unchanged,omitempty"`
	// +optional
	Skipped int64 `json:"skipped,omitempty"`
	// +optional
	Failed int64 `json:"failed,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// RestoreList is a list of Restores.
type RestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Restore `json:"items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Schedule creates hub Backups from its template on a cron schedule. Each
// is named <schedule>-<YYYYMMDDhhmmss> (UTC, the time it was due) and
// labelled ferry.dev/schedule=<schedule>.
type Schedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ScheduleSpec   `json:"spec,omitempty"`
	Status ScheduleStatus `json:"status,omitempty"`
}

// ScheduleSpec says when to back up, and what.
type ScheduleSpec struct {
	// Schedule is a five-field cron expression ("0 */6 * * *") or a
	// descriptor ("@hourly", "@every 1h30m"), as robfig/cron's
	// ParseStandard reads it, in UTC; runs are at least a minute apart.
	Schedule string `json:"schedule"`
	// Template is the spec of every Backup created.
	Template BackupSpec `json:"template"`
	// Paused stops the Schedule; runs missed while paused are not made up.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// SchedulePhase is Enabled or Paused.
type SchedulePhase string

// Schedule phases.
const (
	ScheduleEnabled SchedulePhase = "Enabled"
	SchedulePaused  SchedulePhase = "Paused"
)

// ScheduleStatus is what the hub reports of a Schedule.
type ScheduleStatus struct {
	// +optional
	Phase SchedulePhase `json:"phase,omitempty"`
	// LastBackup is the due time of the last Backup created.
	// +optional
	LastBackup *metav1.Time `json:"lastBackup,omitempty"`
	// NextBackup is when the next Backup is due; nil when paused.
	// +optional
	NextBackup *metav1.Time `json:"nextBackup,omitempty"`
	// ObservedGeneration is the generation of the spec last seen.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ScheduleList is a list of Schedules.
type ScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Schedule `json:"items"`
}

// LabelSchedule is set on every Backup a Schedule creates; its value is
// the Schedule's name.
const LabelSchedule = "ferry.dev/schedule"
