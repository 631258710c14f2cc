package v1alpha1

import (
	"k8s.io/apimachinery/pkg/conversion"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
)

// Convert_v1alpha1_MigrationSpec_To_ferry_MigrationSpec converts the
// renamed fields: v1alpha1's sourceCluster and targetCluster are
// source.cluster and target.cluster from v1beta1 on.
func Convert_v1alpha1_MigrationSpec_To_ferry_MigrationSpec(in *MigrationSpec, out *ferry.MigrationSpec, s conversion.Scope) error {
	if err := autoConvert_v1alpha1_MigrationSpec_To_ferry_MigrationSpec(in, out, s); err != nil {
		return err
	}
	out.Source.Cluster = in.SourceCluster
	out.Target.Cluster = in.TargetCluster
	return nil
}

// Convert_ferry_MigrationSpec_To_v1alpha1_MigrationSpec is the reverse of
// Convert_v1alpha1_MigrationSpec_To_ferry_MigrationSpec.
func Convert_ferry_MigrationSpec_To_v1alpha1_MigrationSpec(in *ferry.MigrationSpec, out *MigrationSpec, s conversion.Scope) error {
	if err := autoConvert_ferry_MigrationSpec_To_v1alpha1_MigrationSpec(in, out, s); err != nil {
		return err
	}
	out.SourceCluster = in.Source.Cluster
	out.TargetCluster = in.Target.Cluster
	return nil
}
