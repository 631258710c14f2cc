package ferry

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the hub's API group.
const GroupName = "ferry.dev"

// SchemeGroupVersion is the internal version of ferry.dev.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

// Kind returns the GroupKind of kind in ferry.dev.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// Resource returns the GroupResource of resource (plural) in ferry.dev.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers the internal types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the internal types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Cluster{}, &ClusterList{},
		&ClusterCredential{}, &ClusterCredentialList{},
		&Credential{}, &CredentialList{},
		&Migration{}, &MigrationList{},
		&BackupStorageLocation{}, &BackupStorageLocationList{},
		&Backup{}, &BackupList{},
		&Restore{}, &RestoreList{},
		&Schedule{}, &ScheduleList{},
	)
	return nil
}
