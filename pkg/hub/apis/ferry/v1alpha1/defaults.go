package v1alpha1

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
