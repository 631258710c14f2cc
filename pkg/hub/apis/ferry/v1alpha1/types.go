package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Cluster is a member cluster the hub can migrate from or to: which
// ClusterCredential holds its kubeconfig, and which context of it to use.
// Its status is written by the hub's controllers.
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterSpec   `json:"spec,omitempty"`
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterSpec says how to reach a member cluster.
type ClusterSpec struct {
	// CredentialRef names the ClusterCredential, in the Cluster's namespace,
	// that holds the cluster's kubeconfig.
	CredentialRef LocalObjectReference `json:"credentialRef"`
	// Context is the kubeconfig context to use; empty: its current context.
	// +optional
	Context string `json:"context,omitempty"`
	// NodePodsDir is the kubelet's pods directory on the cluster's nodes,
	// which the helper pods that move volume data mount to reach volumes
	// that are not claims; empty: /var/lib/kubelet/pods.
	// +optional
	NodePodsDir string `json:"nodePodsDir,omitempty"`
}

// LocalObjectReference names an object in the referrer's namespace.
type LocalObjectReference struct {
	Name string `json:"name"`
}

// ClusterConditionReachable is the Cluster condition that is True when the
// hub last reached the cluster's API server.
const ClusterConditionReachable = "Reachable"

// ClusterStatus is what the hub last saw of a member cluster.
type ClusterStatus struct {
	// Conditions: Reachable.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ServerVersion is the cluster's API server git version.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`
	// LastChecked is when the hub last tried to reach the cluster.
	// +optional
	LastChecked *metav1.Time `json:"lastChecked,omitempty"`
	// ObservedGeneration is the generation of the spec last checked.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterList is a list of Clusters.
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Cluster `json:"items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterCredential holds a member cluster's kubeconfig, like a Secret of
// the hub's own. The hub stores it encrypted at rest.
type ClusterCredential struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Kubeconfig is the kubeconfig file's bytes.
	Kubeconfig []byte `json:"kubeconfig,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterCredentialList is a list of ClusterCredentials.
type ClusterCredentialList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterCredential `json:"items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Credential holds credentials the hub uses, like a Secret of the hub's
// own: a backup storage location's (a Migration's
// spec.storage.credentialRef, a BackupStorageLocation's spec.credentialRef;
// its keys are those of the location's scheme, as a server-mode location's
// Secret holds them: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for s3://,
// AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY for azblob://,
// GOOGLE_APPLICATION_CREDENTIALS_JSON for gs://) or an age identity
// (spec.encryption.identityRef of either). The hub stores it encrypted at
// rest. data holds bytes (base64 in YAML and JSON).
type Credential struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Data maps a key to its value.
	// +optional
	Data map[string][]byte `json:"data,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CredentialList is a list of Credentials.
type CredentialList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Credential `json:"items"`
}

// CredentialKeyReference names one key of a Credential in the referrer's
// namespace.
type CredentialKeyReference struct {
	// Name is the Credential's name.
	Name string `json:"name"`
	// Key is the key of its data.
	Key string `json:"key"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Migration is one migration between two member clusters, as `ferry
// migrate` runs it: backup of the source, images, volume data, restore into
// the target, verification. The hub's controller drives its status.
type Migration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MigrationSpec   `json:"spec,omitempty"`
	Status MigrationStatus `json:"status,omitempty"`
}

// MigrationSpec is what to migrate, from where to where, and how.
type MigrationSpec struct {
	// SourceCluster names the Cluster backed up (v1beta1: source.cluster).
	SourceCluster string `json:"sourceCluster"`
	// TargetCluster names the Cluster restored into (v1beta1: target.cluster).
	TargetCluster string `json:"targetCluster"`
	// Storage is the backup storage location both clusters share.
	Storage MigrationStorage `json:"storage"`
	// Encryption encrypts the backup with age, as ferry migrate's
	// --encryption-recipient and --encryption-identity do.
	// +optional
	Encryption Encryption `json:"encryption,omitempty"`
	// Backup selects what is backed up.
	// +optional
	Backup MigrationBackup `json:"backup,omitempty"`
	// Restore says how it is restored.
	// +optional
	Restore MigrationRestore `json:"restore,omitempty"`
	// Images is what happens to the images the workloads name.
	// +optional
	Images MigrationImages `json:"images,omitempty"`
	// Volumes moves the data of pod volumes (file-system backup).
	// +optional
	Volumes bool `json:"volumes,omitempty"`
	// Verify compares every backed-up object with the target after the
	// restore and writes the report (default true).
	// +optional
	Verify *bool `json:"verify,omitempty"`
	// VerifyRuntime tunes the runtime checks of the verification, as a
	// ferry.dev/v1alpha1 Restore's spec.verifyRuntime does: the restored
	// workloads are waited for until they run (default 5m), Services until
	// they have a ready endpoint, claims until they are bound, and each
	// image the workloads name is resolved at its registry.
	// +optional
	VerifyRuntime *RuntimeVerification `json:"verifyRuntime,omitempty"`
	// Staged makes the Migration a staged one: stages on an interval while
	// the source runs, then the cutover spec.staged.cutover triggers. Set
	// at creation only; while it is set, only spec.staged may change.
	// +optional
	Staged *StagedMigration `json:"staged,omitempty"`
	// Timeouts bound the steps; a step that does not end in time fails
	// the Migration, naming its field (unset: the hub's --backup-timeout,
	// --restore-timeout and --verify-timeout).
	// +optional
	Timeouts *MigrationTimeouts `json:"timeouts,omitempty"`
	// PreflightOnly makes the Migration a pre-flight check, as ferry
	// migrate --preflight: the source and the target are read, nothing is
	// written to either or to the location, and status.preflight holds
	// the risks and the time estimate. It ends Completed without a
	// blocker, PartiallyFailed (reason PreflightBlocked) with one. Set at
	// creation only; not with spec.staged.
	// +optional
	PreflightOnly bool `json:"preflightOnly,omitempty"`
}

// MigrationTimeouts are a Migration's step deadlines; 0 is none.
type MigrationTimeouts struct {
	// Backup bounds the backup: items, images and volume data (the hub's
	// default: 24h). A backup cut short is left Incomplete.
	// +optional
	Backup *metav1.Duration `json:"backup,omitempty"`
	// Restore bounds the restore, volume data included (the hub's
	// default: 24h). A restore cut short is recorded Failed; the same
	// Migration created again resumes it.
	// +optional
	Restore *metav1.Duration `json:"restore,omitempty"`
	// Verify bounds the verification (the hub's default: 1h).
	// +optional
	Verify *metav1.Duration `json:"verify,omitempty"`
}

// RuntimeVerification tunes a verification's runtime checks.
type RuntimeVerification struct {
	// Skip leaves the runtime checks out (a move of resources only).
	// +optional
	Skip bool `json:"skip,omitempty"`
	// Timeout bounds the wait for the restored workloads to run (default 5m).
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// MigrationStorage is the backup storage location of a Migration.
type MigrationStorage struct {
	// Location is the location's URL (file://, s3://, gs://, azblob://).
	Location string `json:"location"`
	// CredentialRef names the Credential, in the Migration's namespace,
	// that holds the location's credentials; empty: the hub's own
	// (its environment or workload identity).
	// +optional
	CredentialRef *LocalObjectReference `json:"credentialRef,omitempty"`
}

// Encryption encrypts a backup (archive, records, reports) of a
// Migration or a BackupStorageLocation for age recipients, and reads it back for the restore with an
// identity. Either may be given alone: recipients need an identity that
// matches one of them, and an identity alone encrypts for its own
// public key.
type Encryption struct {
	// Recipients are age public keys (age1...).
	// +optional
	Recipients []string `json:"recipients,omitempty"`
	// IdentityRef names the Credential key holding the age identity
	// (age-keygen's file) that decrypts the backup.
	// +optional
	IdentityRef *CredentialKeyReference `json:"identityRef,omitempty"`
}

// MigrationBackup selects what a Migration backs up, as ferry.dev/v1alpha1
// BackupSpec does. Empty include lists mean all; namespace entries are globs.
type MigrationBackup struct {
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
	// TTL is how long the backup is kept; empty or zero: until deleted.
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// PreferredVersionOnly backs up each resource at its preferred version
	// only, not at every version the source serves.
	// +optional
	PreferredVersionOnly bool `json:"preferredVersionOnly,omitempty"`
}

// MigrationRestore says how a Migration restores, as ferry.dev/v1alpha1
// RestoreSpec does.
type MigrationRestore struct {
	// NamespaceMapping maps source namespaces to target ones.
	// +optional
	NamespaceMapping map[string]string `json:"namespaceMapping,omitempty"`
	// StorageClassMapping maps source storage classes to target ones.
	// +optional
	StorageClassMapping map[string]string `json:"storageClassMapping,omitempty"`
	// ExistingResourcePolicy is none (default: compare and report) or update.
	// +optional
	ExistingResourcePolicy string `json:"existingResourcePolicy,omitempty"`
	// ExistingVolumeDataPolicy is write (default: a claim that lacks the
	// backup's data gets it) or keep (a claim the restore did not create
	// keeps its data, and its workloads are held back).
	// +optional
	ExistingVolumeDataPolicy string `json:"existingVolumeDataPolicy,omitempty"`
	// PreserveNodePorts keeps every node port of restored Services, also
	// those the source's API server allocated; without it, only those a
	// client set are kept.
	// +optional
	PreserveNodePorts bool `json:"preserveNodePorts,omitempty"`
	// RestoreStatus lists resources whose .status is restored too.
	// +optional
	RestoreStatus []string `json:"restoreStatus,omitempty"`
	// ResourceModifiers is a resource-modifier rule file (YAML, Velero's
	// format) applied to the restored objects.
	// +optional
	ResourceModifiers string `json:"resourceModifiers,omitempty"`
	// FromCloud and ToCloud name the cloud profiles (alibaba, tencent, aws,
	// gcp, azure, generic) to translate cloud-specific fields between.
	// +optional
	FromCloud string `json:"fromCloud,omitempty"`
	// ToCloud names the cloud the target runs on, whose annotations the restore writes (see fromCloud).
	// +optional
	ToCloud string `json:"toCloud,omitempty"`
	// DryRun plans the restore and checks every object with server-side
	// dry-run requests; nothing is written to the target, and there is no
	// verification.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// CRDTimeout bounds the wait for each restored CRD to be Established
	// (default 60s).
	// +optional
	CRDTimeout *metav1.Duration `json:"crdTimeout,omitempty"`
}

// MigrationImages is what a Migration does with images: mode none, record
// (default), copy (to the registries RegistryMappings name) or bundle (into
// the location, pushed on restore to RegistryMappings).
type MigrationImages struct {
	// Mode is what happens to the images the workloads name: none, record (default), copy (to registryMappings) or bundle (into the location).
	// +optional
	Mode string `json:"mode,omitempty"`
	// RegistryMappings are "old-host/ns=new-host/ns" entries.
	// +optional
	RegistryMappings []string `json:"registryMappings,omitempty"`
	// Required makes a failed image fail the backup, and a failed image
	// push or reference rewrite fail the restore.
	// +optional
	Required bool `json:"required,omitempty"`
}

// MigrationPhase is where a Migration is: Pending, then the steps Backup,
// Images, Volumes, Restore, Verify, and one of Completed, PartiallyFailed,
// Failed.
type MigrationPhase string

// Migration phases.
const (
	PhasePending         MigrationPhase = "Pending"
	PhaseBackup          MigrationPhase = "Backup"
	PhaseImages          MigrationPhase = "Images"
	PhaseVolumes         MigrationPhase = "Volumes"
	PhaseRestore         MigrationPhase = "Restore"
	PhaseVerify          MigrationPhase = "Verify"
	PhaseCompleted       MigrationPhase = "Completed"
	PhasePartiallyFailed MigrationPhase = "PartiallyFailed"
	PhaseFailed          MigrationPhase = "Failed"
	// A staged Migration is Staging while a stage runs, Staged between
	// stages, and at Quiesce while the cutover stops the source; the
	// cutover's migration then goes through the steps above.
	PhaseStaging MigrationPhase = "Staging"
	// PhasePreflight is a spec.preflightOnly Migration's one step.
	PhasePreflight MigrationPhase = "Preflight"
	PhaseStaged    MigrationPhase = "Staged"
	PhaseQuiesce   MigrationPhase = "Quiesce"
)

// MigrationConditionSucceeded is True once a Migration Completed, False
// when it ended otherwise (as ferry.dev/v1alpha1's Succeeded).
const MigrationConditionSucceeded = "Succeeded"

// MigrationStatus is what the hub's controller reports of a Migration.
type MigrationStatus struct {
	// +optional
	Phase MigrationPhase `json:"phase,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec the status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// +optional
	Counts MigrationCounts `json:"counts,omitempty"`
	// ReportLocation is where the verification report is.
	// +optional
	ReportLocation string `json:"reportLocation,omitempty"`
	// Reason is a CamelCase word for why it failed.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says what failed.
	// +optional
	Message string `json:"message,omitempty"`
	// Lease is held by the hub process carrying the Migration out, renewed
	// while it runs. A lease not renewed within its duration is expired:
	// that process stopped, and another hub takes the Migration over.
	// +optional
	Lease *Lease `json:"lease,omitempty"`
	// StageCount counts a staged Migration's stages; Stages are the
	// last 20 of them, oldest first.
	// +optional
	StageCount int32 `json:"stageCount,omitempty"`
	// +optional
	Stages []MigrationStage `json:"stages,omitempty"`
	// NextStageTime is when the next stage starts, unless the cutover
	// is triggered first.
	// +optional
	NextStageTime *metav1.Time `json:"nextStageTime,omitempty"`
	// Prediction is the cutover's predicted downtime after the last
	// stage (the cutover's own, once it began).
	// +optional
	Prediction *MigrationPrediction `json:"prediction,omitempty"`
	// Cutover is the cutover's progress and its actual downtime.
	// +optional
	Cutover *MigrationCutover `json:"cutover,omitempty"`
	// Preflight is what a spec.preflightOnly Migration found.
	// +optional
	Preflight *MigrationPreflight `json:"preflight,omitempty"`
}

// MigrationPreflight is a pre-flight check's report, as ferry migrate
// --preflight prints it: the counts by severity, the ranked risks (the
// first 50), and the time estimate.
type MigrationPreflight struct {
	// Objects is the number of objects the migration would restore.
	Objects int64 `json:"objects"`
	// Blockers, Warnings and Notes count the risks by severity.
	Blockers int32 `json:"blockers"`
	Warnings int32 `json:"warnings"`
	Notes    int32 `json:"notes"`
	// Risks are the first 50, blockers first.
	// +optional
	Risks []PreflightRisk `json:"risks,omitempty"`
	// Estimate is how long the migration will take, and its parts.
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
	// Check names the check that found it.
	Check string `json:"check"`
	// +optional
	Objects []string `json:"objects,omitempty"`
	// +optional
	ObjectCount int32  `json:"objectCount,omitempty"`
	What        string `json:"what"`
	// +optional
	Fix string `json:"fix,omitempty"`
}

// PreflightEstimatePart is one step of the time estimate.
type PreflightEstimatePart struct {
	Step     string          `json:"step"`
	Duration metav1.Duration `json:"duration"`
	Basis    string          `json:"basis"`
}

// Lease is a hub process's claim on a Migration, Backup or Restore, as a
// coordination.k8s.io Lease's spec holds a leader's.
type Lease struct {
	// HolderIdentity names the hub process (host name and a random suffix).
	HolderIdentity string `json:"holderIdentity"`
	// LeaseDurationSeconds is how long the claim lasts after RenewTime.
	LeaseDurationSeconds int32 `json:"leaseDurationSeconds"`
	// RenewTime is when the holder last renewed the claim.
	RenewTime metav1.MicroTime `json:"renewTime"`
}

// MigrationCounts counts a Migration's items.
type MigrationCounts struct {
	// +optional
	BackedUp int64 `json:"backedUp,omitempty"`
	// +optional
	Restored int64 `json:"restored,omitempty"`
	// +optional
	Failed int64 `json:"failed,omitempty"`
	// +optional
	Skipped int64 `json:"skipped,omitempty"`
	// Workloads, Services, Claims and Images count the runtime checks of
	// the verification; WorkloadsRunning, ServicesServing, ClaimsBound and
	// ImagesPresent those that passed, RuntimeFailed those that failed.
	// +optional
	Workloads int64 `json:"workloads,omitempty"`
	// +optional
	WorkloadsRunning int64 `json:"workloadsRunning,omitempty"`
	// +optional
	Services int64 `json:"services,omitempty"`
	// +optional
	ServicesServing int64 `json:"servicesServing,omitempty"`
	// +optional
	Claims int64 `json:"claims,omitempty"`
	// +optional
	ClaimsBound int64 `json:"claimsBound,omitempty"`
	// ClaimsWithData counts the claims whose data the restore wrote,
	// ClaimsEqual those whose content is what it wrote (or that their
	// application changed since).
	// +optional
	ClaimsWithData int64 `json:"claimsWithData,omitempty"`
	// +optional
	ClaimsEqual int64 `json:"claimsEqual,omitempty"`
	// +optional
	Images int64 `json:"images,omitempty"`
	// +optional
	ImagesPresent int64 `json:"imagesPresent,omitempty"`
	// +optional
	RuntimeFailed int64 `json:"runtimeFailed,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MigrationList is a list of Migrations.
type MigrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Migration `json:"items"`
}
