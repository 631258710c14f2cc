// Package v1alpha1 holds ferry's API types, group ferry.dev, version v1alpha1.
//
// The same types are the CLI's -o json/yaml output and the documents ferry
// writes into the object store (backups/<name>/ferry-backup.json,
// restores/<name>/ferry-restore.json), so a backup made by the CLI can be
// read back by any later ferry.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group and Version of ferry's API.
const (
	Group   = "ferry.dev"
	Version = "v1alpha1"
	// APIVersion is Group/Version, the apiVersion of every ferry object.
	APIVersion = Group + "/" + Version
)

// Phase is the lifecycle phase of a Backup or Restore.
type Phase string

// Phases. A backup is restorable only when its committed ferry-backup.json
// says Completed or PartiallyFailed; Incomplete is never written, it is what
// `ferry backup get` shows for a backup whose commit marker is missing.
const (
	PhaseNew             Phase = "New"
	PhaseInProgress      Phase = "InProgress"
	PhaseCompleted       Phase = "Completed"
	PhasePartiallyFailed Phase = "PartiallyFailed"
	PhaseFailed          Phase = "Failed"
	PhaseIncomplete      Phase = "Incomplete"
)

// ConditionSucceeded is set on a Backup or Restore when it ends (server
// mode): True when Completed; False otherwise, with one of the Reason*
// reasons and the failure as the message, so that
// kubectl wait can wait for condition Succeeded.
const ConditionSucceeded = "Succeeded"

// Reasons of ConditionSucceeded.
const (
	ReasonCompleted           = "Completed"
	ReasonPartiallyFailed     = "PartiallyFailed"
	ReasonFailed              = "Failed"
	ReasonInvalidSpec         = "InvalidSpec"
	ReasonLocationNotFound    = "LocationNotFound"
	ReasonLocationUnavailable = "LocationUnavailable"
	ReasonBackupNotRestorable = "BackupNotRestorable"
	ReasonServerStopped       = "ServerStopped"
	// ReasonPreflightBlocked ends a spec.preflightOnly Restore whose
	// pre-flight check found a blocker (PartiallyFailed).
	ReasonPreflightBlocked = "PreflightBlocked"
)

// Labels ferry puts on every restored object.
const (
	LabelBackup  = "ferry.dev/backup"
	LabelRestore = "ferry.dev/restore"
)

// LabelHelperRun is on every object of a run of ferry's helper pods
// (pkg/helperpod): its value names the run. A backup leaves such objects
// out, and a restore does not wait for them.
const LabelHelperRun = "ferry.dev/helper-run"

// Backup is one backup: its spec (what was asked) and status (what happened).
// In server mode it is a namespaced custom resource in the server's
// namespace; a new one (phase "" or New) is taken once by `ferry server`.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=ferry
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Items",type=integer,JSONPath=`.status.progress.itemsBackedUp`
// +kubebuilder:printcolumn:name="Errors",type=integer,JSONPath=`.status.errors`
// +kubebuilder:printcolumn:name="Warnings",type=integer,JSONPath=`.status.warnings`
// +kubebuilder:printcolumn:name="Location",type=string,JSONPath=`.metadata.labels.ferry\.dev/storage-location`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.status.expiration`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 181",message="a Backup name is at most 181 characters (its store folder, restore names and schedule suffixes are built on it)"
type Backup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BackupSpec   `json:"spec"`
	Status            BackupStatus `json:"status,omitempty"`
}

// BackupSpec selects what a backup holds. Empty include lists mean "all";
// namespace entries are globs (path.Match syntax); resource entries are
// resource names, optionally qualified by group ("deployments.apps").
type BackupSpec struct {
	IncludedNamespaces []string `json:"includedNamespaces,omitempty"`
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`
	IncludedResources  []string `json:"includedResources,omitempty"`
	ExcludedResources  []string `json:"excludedResources,omitempty"`
	// LabelSelector is a label selector in kubectl syntax ("app=web,tier!=db").
	LabelSelector string `json:"labelSelector,omitempty"`
	// IncludeClusterResources is "auto" (default), "true" or "false".
	// +kubebuilder:validation:Enum=auto;"true";"false"
	IncludeClusterResources string `json:"includeClusterResources,omitempty"`
	// StorageLocation is the URL of the backup storage location (credentials never included).
	StorageLocation string `json:"storageLocation,omitempty"`
	// EncryptionRecipients are the age public keys the archive and the
	// results were encrypted for (empty: not encrypted).
	EncryptionRecipients []string `json:"encryptionRecipients,omitempty"`
	// PreferredVersionOnly stores each resource at its preferred version
	// only. By default every served version is stored as well (docs/design.md#the-archive-format),
	// so that a target that no longer serves the preferred version can
	// still take the objects.
	PreferredVersionOnly bool `json:"preferredVersionOnly,omitempty"`
	// Images is what the backup does with the images its workloads name:
	// none, record (default: resolve and record their digests), copy (to
	// ImageRegistryMappings) or bundle (into the store's images/).
	Images string `json:"images,omitempty"`
	// ImageRegistryMappings are "old-host/ns=new-host/ns" entries (copy).
	ImageRegistryMappings []string `json:"imageRegistryMappings,omitempty"`
	// ImagesRequired makes a failed image fail the backup.
	ImagesRequired bool `json:"imagesRequired,omitempty"`
	// DefaultVolumesToFsBackup backs up every pod volume's data (file-system
	// backup, kopia) except those excluded by annotation and the types
	// never copied; without it only volumes named in a pod's
	// backup.ferry.dev/backup-volumes annotation are.
	DefaultVolumesToFsBackup bool `json:"defaultVolumesToFsBackup,omitempty"`
	// StorageLocationName names the BackupStorageLocation (server mode) to
	// write to; empty means the location marked default.
	// +optional
	StorageLocationName string `json:"storageLocationName,omitempty"`
	// TTL is how long the backup is kept (server mode): after
	// status.startTimestamp + TTL the server's garbage collector deletes it
	// from the store and the cluster. Empty or zero: kept until deleted.
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// BackupStatus reports a backup's outcome.
type BackupStatus struct {
	// +kubebuilder:validation:Enum=New;InProgress;Completed;PartiallyFailed;Failed;Incomplete
	Phase               Phase        `json:"phase,omitempty"`
	StartTimestamp      *metav1.Time `json:"startTimestamp,omitempty"`
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// +optional
	Progress BackupProgress `json:"progress"`
	// +optional
	Warnings int `json:"warnings"`
	// +optional
	Errors        int          `json:"errors"`
	FailureReason string       `json:"failureReason,omitempty"`
	SourceCluster *ClusterInfo `json:"sourceCluster,omitempty"`
	// HookStatus counts the backup hooks run and failed (Velero's
	// hookStatus); nil when no pod had one.
	HookStatus *HookStatus     `json:"hookStatus,omitempty"`
	Archive    *ArchiveSummary `json:"archive,omitempty"`
	// ResourceCounts counts backed-up items by group-resource ("deployments.apps").
	ResourceCounts map[string]int `json:"resourceCounts,omitempty"`
	// Retries counts the requests retried after transient failures.
	Retries *RetryCounts `json:"retries,omitempty"`
	// Images summarizes the images file (backups/<name>/<name>-images.json);
	// nil when spec.images is none.
	Images *ImagesSummary `json:"images,omitempty"`
	// PodVolumes summarizes the pod volume data backed up (nil when the
	// backup did not back up volume data); the per-volume records are in
	// backups/<name>/<name>-volumes.json.
	PodVolumes *PodVolumeSummary `json:"podVolumes,omitempty"`
	// Expiration is when the garbage collector deletes the backup
	// (startTimestamp + spec.ttl), set by the server; nil: never.
	// +optional
	Expiration *metav1.Time `json:"expiration,omitempty"`
	// Conditions (server mode): ConditionSucceeded once it ends.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ImagesSummary pins a backup's images file: its key and SHA-256 (hex),
// checked before a restore uses it; how many distinct image references
// the workloads name, and how many could not be resolved, copied or
// bundled. When spec.images is bundle, IndexKey and IndexSHA256 pin the OCI
// image index of the bundled images, and the blob counts say how many
// blobs the backup wrote to images/blobs/ and how many it found there.
type ImagesSummary struct {
	Mode         string `json:"mode"`
	Key          string `json:"key"`
	SHA256       string `json:"sha256"`
	Images       int    `json:"images"`
	Failed       int    `json:"failed"`
	IndexKey     string `json:"indexKey,omitempty"`
	IndexSHA256  string `json:"indexSHA256,omitempty"`
	BlobsWritten int64  `json:"blobsWritten,omitempty"`
	BlobsReused  int64  `json:"blobsReused,omitempty"`
	BytesWritten int64  `json:"bytesWritten,omitempty"`
}

// PodVolumeSummary counts pod volumes backed up or restored. Bytes counts
// the volumes' file data; UploadedBytes what a backup wrote to the store
// after deduplication (new, encrypted data).
type PodVolumeSummary struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	// Deferred counts volumes a restore left to the node agents.
	Deferred      int   `json:"deferred,omitempty"`
	Bytes         int64 `json:"bytes"`
	Files         int64 `json:"files"`
	UploadedBytes int64 `json:"uploadedBytes,omitempty"`
}

// RetryCounts counts requests retried after transient failures: to the
// object store (5xx, timeouts, connection resets) and to the API server
// (429 with Retry-After). They count the whole ferry process up to the
// commit, so a migrate's restore includes its backup's retries.
type RetryCounts struct {
	ObjectStore int64 `json:"objectStore"`
	APIServer   int64 `json:"apiServer"`
	// Registry counts image registry requests retried (408, 429, 5xx,
	// timeouts, resets).
	Registry int64 `json:"registry"`
}

// BackupProgress counts items. TotalItems is the number of items selected,
// ItemsBackedUp those written into the archive.
type BackupProgress struct {
	TotalItems    int `json:"totalItems"`
	ItemsBackedUp int `json:"itemsBackedUp"`
}

// ClusterInfo identifies a cluster by its API server address and version.
type ClusterInfo struct {
	Server     string `json:"server,omitempty"`
	GitVersion string `json:"gitVersion,omitempty"`
}

// ArchiveSummary pins the archive a backup committed: its store key, size
// in bytes and SHA-256 (hex) of the whole tar.gz, and the SHA-256 of the
// manifest inside it. A restore refuses an archive that does not match.
type ArchiveSummary struct {
	Key            string `json:"key"`
	Size           int64  `json:"size"`
	SHA256         string `json:"sha256"`
	ManifestSHA256 string `json:"manifestSHA256"`
	Entries        int    `json:"entries"`
	// Encryption is "age" when the stored archive is age-encrypted; Size
	// and SHA256 are then those of the tar.gz inside.
	Encryption string `json:"encryption,omitempty"`
}

// Restore is one restore of a backup into a cluster. In server mode it is
// a namespaced custom resource in the server's namespace, restored into the
// server's own cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=ferry
// +kubebuilder:printcolumn:name="Backup",type=string,JSONPath=`.spec.backupName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Created",type=integer,JSONPath=`.status.counts.created`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.counts.failed`
// +kubebuilder:printcolumn:name="Errors",type=integer,JSONPath=`.status.errors`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 200",message="a Restore name is at most 200 characters (its store folder)"
type Restore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              RestoreSpec   `json:"spec"`
	Status            RestoreStatus `json:"status,omitempty"`
}

// ExistingResourcePolicy says what a restore does with an object that is
// already in the target: "none" compares and reports, "update" updates it.
type ExistingResourcePolicy string

// Existing-resource policies.
const (
	PolicyNone   ExistingResourcePolicy = "none"
	PolicyUpdate ExistingResourcePolicy = "update"
)

// ExistingVolumeDataPolicy says what a restore does with a claim already
// in the target that does not hold the backup's data (no done-marker of
// its snapshot): "write" writes the snapshot into it (entries of the same
// name are replaced), "keep" leaves it alone and holds back the workloads
// that mount it. A claim that holds the snapshot's done-marker is never
// written again, and one that a pod mounts is never written.
type ExistingVolumeDataPolicy string

// Existing-volume-data policies.
const (
	VolumeDataWrite ExistingVolumeDataPolicy = "write"
	VolumeDataKeep  ExistingVolumeDataPolicy = "keep"
)

// QuiescedWorkload is one source workload a cutover quiesced: a
// Deployment, StatefulSet or ReplicaSet (apps) with the replica count it
// had, or a CronJob (batch) with whether it was suspended already.
type QuiescedWorkload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Replicas is a scalable workload's count before the quiesce.
	Replicas *int32 `json:"replicas,omitempty"`
	// Suspended is a CronJob's spec.suspend before the quiesce.
	Suspended *bool `json:"suspended,omitempty"`
}

// RestoreSpec says what to restore and how.
type RestoreSpec struct {
	// +kubebuilder:validation:MinLength=1
	BackupName string `json:"backupName"`
	// FromVelero says BackupName is a backup made by Velero, read from its
	// own object-store and archive layout.
	FromVelero         bool     `json:"fromVelero,omitempty"`
	IncludedNamespaces []string `json:"includedNamespaces,omitempty"`
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`
	IncludedResources  []string `json:"includedResources,omitempty"`
	ExcludedResources  []string `json:"excludedResources,omitempty"`
	// NamespaceMapping maps source namespace names to target names.
	NamespaceMapping map[string]string `json:"namespaceMapping,omitempty"`
	// +kubebuilder:validation:Enum=none;update
	ExistingResourcePolicy ExistingResourcePolicy `json:"existingResourcePolicy,omitempty"`
	// ExistingVolumeDataPolicy (default write) is for claims already in the
	// target that do not hold the backup's data.
	// +kubebuilder:validation:Enum=write;keep
	ExistingVolumeDataPolicy ExistingVolumeDataPolicy `json:"existingVolumeDataPolicy,omitempty"`
	// PreserveNodePorts keeps every node port of restored Services, also
	// those the source's API server allocated; without it, only those a
	// client set are kept.
	PreserveNodePorts bool `json:"preserveNodePorts,omitempty"`
	// RestoreStatus lists resources whose .status is restored too.
	RestoreStatus []string `json:"restoreStatus,omitempty"`
	// StorageClassMapping maps source storage classes to target ones.
	StorageClassMapping map[string]string `json:"storageClassMapping,omitempty"`
	// ResourceModifiers is a resource-modifier rule file (YAML, Velero's
	// format, see pkg/modifiers) applied to every restored object.
	ResourceModifiers string `json:"resourceModifiers,omitempty"`
	// QuiescedWorkloads are the source's workloads as they were before a
	// staged migration's cutover scaled them to zero and suspended them
	// (its backup holds them so): each is restored at its recorded replica
	// count and suspension.
	QuiescedWorkloads []QuiescedWorkload `json:"quiescedWorkloads,omitempty"`
	// FromCloud and ToCloud name the cloud profiles (alibaba, tencent, aws,
	// gcp, azure, generic) to translate cloud-specific fields between.
	FromCloud string `json:"fromCloud,omitempty"`
	ToCloud   string `json:"toCloud,omitempty"`
	// DryRun plans the restore and checks every object with server-side
	// dry-run requests; nothing is written to the target or the store.
	DryRun bool `json:"dryRun,omitempty"`
	// ImageRegistryMappings ("old-host/ns=new-host/ns") rewrite the image
	// references of every pod template, keeping the tag and pinning the
	// digest the backup recorded.
	ImageRegistryMappings []string `json:"imageRegistryMappings,omitempty"`
	// PushImages pushes the images a backup of spec.images bundle holds to the
	// registries ImageRegistryMappings name, before any object is written.
	PushImages bool `json:"pushImages,omitempty"`
	// ImagesRequired makes a failed image push, or an image reference that
	// cannot be rewritten, fail the restore.
	ImagesRequired bool `json:"imagesRequired,omitempty"`
	// StorageLocationName names the BackupStorageLocation (server mode) to
	// read the backup from; empty means the location marked default.
	// +optional
	StorageLocationName string `json:"storageLocationName,omitempty"`
	// CRDTimeout bounds the wait for each restored CRD to be Established
	// (default 60s).
	// +optional
	CRDTimeout *metav1.Duration `json:"crdTimeout,omitempty"`
	// EncryptionIdentitySecret (server mode) names a Secret in the
	// server's namespace whose key holds the age identities (an age key
	// file) that decrypt an encrypted backup, as the CLI's identity file
	// does.
	// +optional
	EncryptionIdentitySecret *SecretKeyReference `json:"encryptionIdentitySecret,omitempty"`
	// Verify (server mode) compares, after the restore, every object of
	// the backup with the cluster, as ferry migrate's verification does
	// (pkg/migration.VerifyRestore), and keeps the report in the location
	// beside the restore's results (restores/<name>/report.json and
	// report.html); status.verification summarizes it. A difference the
	// restore did not expect makes a Completed restore PartiallyFailed.
	// +optional
	Verify bool `json:"verify,omitempty"`
	// VerifyRuntime tunes the runtime checks of a verification (spec.verify,
	// ferry migrate, ferry verify): after the objects are compared, the
	// restored workloads are waited for until they run, Services until they
	// have a ready endpoint, claims until they are bound, and every image
	// the workloads name is resolved at its registry. Nil: checked, with
	// the default timeout.
	// +optional
	VerifyRuntime *RuntimeVerification `json:"verifyRuntime,omitempty"`
	// PreflightOnly (server mode) runs the pre-flight check of this
	// restore instead of the restore (pkg/preflight, as ferry restore
	// create --preflight does): nothing is written to the cluster or the
	// location but its probes, which are removed; status.preflight holds
	// the risks and the time estimate. It ends Completed without a
	// blocker, PartiallyFailed (reason PreflightBlocked) with one.
	// +optional
	PreflightOnly bool `json:"preflightOnly,omitempty"`
}

// PreflightSummary is a pre-flight check's outcome in a status: the
// counts of its risks by severity, the first 50 risks (blockers first),
// and the time estimate with its parts.
type PreflightSummary struct {
	// Objects is the number of objects the restore would write.
	Objects  int64 `json:"objects"`
	Blockers int32 `json:"blockers"`
	Warnings int32 `json:"warnings"`
	Notes    int32 `json:"notes"`
	// +optional
	Risks []PreflightRisk `json:"risks,omitempty"`
	// Estimate is how long the restore will take.
	// +optional
	Estimate *metav1.Duration `json:"estimate,omitempty"`
	// +optional
	EstimateParts []PreflightEstimatePart `json:"estimateParts,omitempty"`
	// Skipped says what could not be checked, and why.
	// +optional
	Skipped []string `json:"skipped,omitempty"`
}

// PreflightRisk is one risk: the objects it concerns (the first 10, with
// ObjectCount all of them), what will happen, and the fix.
type PreflightRisk struct {
	// Severity is blocker, warning or note.
	Severity string `json:"severity"`
	Check    string `json:"check"`
	// +optional
	Objects []string `json:"objects,omitempty"`
	// +optional
	ObjectCount int32  `json:"objectCount,omitempty"`
	What        string `json:"what"`
	// +optional
	Fix string `json:"fix,omitempty"`
}

// PreflightEstimatePart is one step of the estimate.
type PreflightEstimatePart struct {
	Step     string          `json:"step"`
	Duration metav1.Duration `json:"duration"`
	Basis    string          `json:"basis"`
}

// RuntimeVerification tunes the runtime checks of a verification.
type RuntimeVerification struct {
	// Skip leaves the runtime checks out (a move of resources only, whose
	// workloads are not meant to run in the target yet); the report says so.
	// +optional
	Skip bool `json:"skip,omitempty"`
	// Timeout bounds the wait for the restored workloads to run (default 5m).
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// SecretKeyReference names a key of a Secret in the same namespace.
type SecretKeyReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key defaults to "identity".
	// +optional
	Key string `json:"key,omitempty"`
}

// RestoreStatus reports a restore's outcome.
type RestoreStatus struct {
	// +kubebuilder:validation:Enum=New;InProgress;Completed;PartiallyFailed;Failed;Incomplete
	Phase               Phase        `json:"phase,omitempty"`
	StartTimestamp      *metav1.Time `json:"startTimestamp,omitempty"`
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// +optional
	Counts RestoreCounts `json:"counts"`
	// +optional
	Warnings int `json:"warnings"`
	// +optional
	Errors        int          `json:"errors"`
	FailureReason string       `json:"failureReason,omitempty"`
	TargetCluster *ClusterInfo `json:"targetCluster,omitempty"`
	// HeartbeatTime is when the process running the restore last said it
	// was alive (in the location's record, while it is InProgress): a
	// record InProgress whose heartbeat is older than a minute belongs to
	// a process that was killed.
	HeartbeatTime *metav1.Time `json:"heartbeatTime,omitempty"`
	// Retries counts the requests retried after transient failures.
	Retries *RetryCounts `json:"retries,omitempty"`
	// ImagesPushed and ImagesFailed count the images pushed from the
	// store (spec.pushImages), those the target already had included.
	ImagesPushed int `json:"imagesPushed,omitempty"`
	ImagesFailed int `json:"imagesFailed,omitempty"`
	// PodVolumes summarizes the pod volume data restored (nil when none was).
	PodVolumes *PodVolumeSummary `json:"podVolumes,omitempty"`
	// Progress counts items as they finish while the restore runs
	// (server mode); nil before it starts.
	// +optional
	Progress *RestoreProgress `json:"progress,omitempty"`
	// Verification summarizes the verification spec.verify asked for
	// (server mode); nil when none ran.
	// +optional
	Verification *VerificationSummary `json:"verification,omitempty"`
	// Preflight is the pre-flight check's outcome (spec.preflightOnly).
	// +optional
	Preflight *PreflightSummary `json:"preflight,omitempty"`
	// Conditions (server mode): ConditionSucceeded once it ends.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// VerificationSummary counts what a verification compared (the report's
// summary: Unexpected is Differ + Missing + Failed, and zero means the
// cluster matches the backup) and says where its report is.
type VerificationSummary struct {
	Objects    int `json:"objects"`
	Matched    int `json:"matched"`
	Differ     int `json:"differ"`
	Missing    int `json:"missing"`
	Failed     int `json:"failed"`
	Unexpected int `json:"unexpected"`
	// Running counts the runtime checks (nil when they did not run).
	// +optional
	Running *RunningSummary `json:"running,omitempty"`
	// Report is the keys of the report in the location (JSON, HTML).
	// +optional
	Report []string `json:"report,omitempty"`
	// Error is why the verification could not finish or its report could
	// not be kept.
	// +optional
	Error string `json:"error,omitempty"`
}

// RunningSummary counts the runtime checks of a verification: restored
// workloads running, Services with a ready endpoint, claims bound, images
// present at their registries; Failed counts the checks that failed, of
// every kind.
type RunningSummary struct {
	Workloads        int `json:"workloads"`
	WorkloadsRunning int `json:"workloadsRunning"`
	Services         int `json:"services"`
	ServicesServing  int `json:"servicesServing"`
	Claims           int `json:"claims"`
	ClaimsBound      int `json:"claimsBound"`
	// ClaimsWithData counts the claims whose data the restore wrote,
	// ClaimsEqual those whose content is what it wrote (or that their
	// application changed since).
	ClaimsWithData int `json:"claimsWithData"`
	ClaimsEqual    int `json:"claimsEqual"`
	Images         int `json:"images"`
	ImagesPresent  int `json:"imagesPresent"`
	Failed         int `json:"failed"`
}

// HookStatus counts the hooks a backup ran: HooksAttempted ran, of which
// HooksFailed failed (with on-error Continue or Fail).
type HookStatus struct {
	HooksAttempted int `json:"hooksAttempted"`
	HooksFailed    int `json:"hooksFailed"`
}

// RestoreProgress counts a running restore's items: TotalItems planned,
// ItemsRestored finished (whatever their outcome).
type RestoreProgress struct {
	TotalItems    int `json:"totalItems"`
	ItemsRestored int `json:"itemsRestored"`
}

// RestoreCounts counts items by outcome. Every item of the plan lands in
// exactly one of them.
type RestoreCounts struct {
	Created   int `json:"created"`
	Updated   int `json:"updated"`
	Unchanged int `json:"unchanged"`
	Skipped   int `json:"skipped"`
	Failed    int `json:"failed"`
}

// Total is the number of items counted.
func (c RestoreCounts) Total() int {
	return c.Created + c.Updated + c.Unchanged + c.Skipped + c.Failed
}

// NewBackup returns a Backup with TypeMeta set.
func NewBackup(name string) *Backup {
	return &Backup{TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: "Backup"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// NewRestore returns a Restore with TypeMeta set.
func NewRestore(name string) *Restore {
	return &Restore{TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: "Restore"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
}
