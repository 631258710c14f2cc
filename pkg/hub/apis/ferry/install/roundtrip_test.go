package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
)

// fuzzerFuncs fill a MigrationSpec as the decoder leaves it: defaulted.
func fuzzerFuncs(runtimeserializer.CodecFactory) []any {
	return []any{
		func(s *ferry.MigrationSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.Backup.IncludeClusterResources == "" {
				s.Backup.IncludeClusterResources = "auto"
			}
			if s.Restore.ExistingResourcePolicy == "" {
				s.Restore.ExistingResourcePolicy = "none"
			}
			if s.Images.Mode == "" {
				s.Images.Mode = "record"
			}
			if s.Verify == nil {
				v := c.Bool()
				s.Verify = &v
			}
		},
		// Backups and Schedule templates: defaulted as the versions do.
		func(s *ferry.BackupSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.IncludeClusterResources == "" {
				s.IncludeClusterResources = "auto"
			}
			if s.Images == "" {
				s.Images = "record"
			}
		},
		func(s *ferry.RestoreSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.ExistingResourcePolicy == "" {
				s.ExistingResourcePolicy = "none"
			}
		},
	}
}

// TestRoundTripTypes fuzzes every kind through both versions and back
// (JSON), v1alpha1's renamed cluster fields included.
func TestRoundTripTypes(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, Install, fuzzerFuncs)
}
