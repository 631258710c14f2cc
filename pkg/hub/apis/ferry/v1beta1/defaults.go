package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_MigrationSpec fills in a Migration's defaults: cluster
// resources auto, existing resources compared (policy none), images
// recorded, and verification on.
func SetDefaults_MigrationSpec(obj *MigrationSpec) {
	if obj.Backup.IncludeClusterResources == "" {
		obj.Backup.IncludeClusterResources = "auto"
	}
	if obj.Restore.ExistingResourcePolicy == "" {
		obj.Restore.ExistingResourcePolicy = "none"
	}
	if obj.Images.Mode == "" {
		obj.Images.Mode = "record"
	}
	if obj.Verify == nil {
		t := true
		obj.Verify = &t
	}
}

// SetDefaults_BackupSpec fills in a Backup's (or a Schedule template's)
// defaults: cluster resources auto, images recorded.
func SetDefaults_BackupSpec(obj *BackupSpec) {
	if obj.IncludeClusterResources == "" {
		obj.IncludeClusterResources = "auto"
	}
	if obj.Images == "" {
		obj.Images = "record"
	}
}

// SetDefaults_RestoreSpec fills in a Restore's defaults: existing
// resources compared (policy none).
func SetDefaults_RestoreSpec(obj *RestoreSpec) {
	if obj.ExistingResourcePolicy == "" {
		obj.ExistingResourcePolicy = "none"
	}
}
