// Package v1alpha1 is ferry's API, group ferry.dev, version v1alpha1: the
// types of server mode (Backup, Restore, Schedule, BackupStorageLocation,
// PodVolumeBackup, PodVolumeRestore), and the names that ferry's parts and
// its users agree on: labels, annotations, condition reasons, and the
// pod-volume handshake between a restore and whoever writes the data
// (podvolume_names.go).
//
// +kubebuilder:object:generate=true
// +groupName=ferry.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is ferry.dev/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// Resource returns the GroupResource of resource (plural, "backups") in ferry.dev.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers ferry's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds ferry's types to a scheme (for controller-runtime
	// clients and managers).
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&Backup{}, &BackupList{},
		&Restore{}, &RestoreList{},
		&Schedule{}, &ScheduleList{},
		&BackupStorageLocation{}, &BackupStorageLocationList{},
		&PodVolumeBackup{}, &PodVolumeBackupList{},
		&PodVolumeRestore{}, &PodVolumeRestoreList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// BackupList is a list of Backups.
//
// +kubebuilder:object:root=true
type BackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Backup `json:"items"`
}

// RestoreList is a list of Restores.
//
// +kubebuilder:object:root=true
type RestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Restore `json:"items"`
}
