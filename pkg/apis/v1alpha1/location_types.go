package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupStorageLocation is an object store ferry's server writes backups
// to and reads them from (pkg/store), with its credentials. The server
// validates each location periodically and keeps the cluster's Backups in
// step with it (store sync).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bsl,categories=ferry
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Default",type=boolean,JSONPath=`.spec.default`
// +kubebuilder:printcolumn:name="Last Validated",type=date,JSONPath=`.status.lastValidationTime`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="a BackupStorageLocation name is at most 63 characters (Backups carry it as a label value)"
type BackupStorageLocation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BackupStorageLocationSpec   `json:"spec"`
	Status            BackupStorageLocationStatus `json:"status,omitempty"`
}

// BackupStorageLocationSpec names the store and its credentials.
type BackupStorageLocationSpec struct {
	// URL is the location as pkg/store opens it: s3://bucket?endpoint=...&region=...,
	// gs://bucket, azblob://container, file:///dir (a directory the server
	// can reach). Credentials never go in the URL.
	// +kubebuilder:validation:Pattern=`^(s3|gs|azblob|file|mem)://`
	URL string `json:"url"`
	// Credential names a Secret in the server's namespace with the
	// location's credentials, under the keys of its scheme: for s3://
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, optionally
	// AWS_SESSION_TOKEN and AWS_REGION; for azblob:// AZURE_STORAGE_ACCOUNT
	// and AZURE_STORAGE_KEY, or AZURE_STORAGE_CONNECTION_STRING; for gs://
	// GOOGLE_APPLICATION_CREDENTIALS_JSON, the content of a service-account
	// key JSON file. A key of another scheme makes the location
	// Unavailable, naming the key. The server, the node agents and the
	// helper pods all use them. Without it the server's own environment
	// (or workload identity) is used.
	// +optional
	Credential *SecretReference `json:"credential,omitempty"`
	// Default marks the location used by Backups and Restores that name none.
	// +optional
	Default bool `json:"default,omitempty"`
	// ValidationFrequency is how often the server checks the location
	// (default: the server's servermode.Options.ValidationPeriod, 1m).
	// +optional
	ValidationFrequency *metav1.Duration `json:"validationFrequency,omitempty"`
}

// SecretReference names a Secret in the object's namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// LocationPhase says whether a location can be used.
type LocationPhase string

// Location phases.
const (
	LocationAvailable   LocationPhase = "Available"
	LocationUnavailable LocationPhase = "Unavailable"
)

// BackupStorageLocationStatus is the result of the last validation.
type BackupStorageLocationStatus struct {
	// +kubebuilder:validation:Enum=Available;Unavailable
	// +optional
	Phase LocationPhase `json:"phase,omitempty"`
	// Message says why the location is Unavailable (pkg/store's error:
	// access denied, bucket not found, unreachable, bad URL).
	// +optional
	Message string `json:"message,omitempty"`
	// LastValidationTime is when the location was last checked.
	// +optional
	LastValidationTime *metav1.Time `json:"lastValidationTime,omitempty"`
	// LastSyncedTime is when store sync last ran against the location.
	// +optional
	LastSyncedTime *metav1.Time `json:"lastSyncedTime,omitempty"`
	// Conditions: "Available".
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BackupStorageLocationList is a list of BackupStorageLocations.
//
// +kubebuilder:object:root=true
type BackupStorageLocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupStorageLocation `json:"items"`
}

// LabelStorageLocation is set on Backups the server processed or synced:
// the BackupStorageLocation that holds them.
const LabelStorageLocation = "ferry.dev/storage-location"
