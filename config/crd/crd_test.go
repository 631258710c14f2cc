package crd

import (
	"testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// Every kind registered in the scheme has a generated CRD with a status
// subresource and a structural schema.
func TestAll(t *testing.T) {
	crds, err := load()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range crds {
		if c.Spec.Group != v1alpha1.Group {
			t.Errorf("%s: group %s", c.Name, c.Spec.Group)
		}
		if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Name != v1alpha1.Version {
			t.Fatalf("%s: versions %+v", c.Name, c.Spec.Versions)
		}
		v := c.Spec.Versions[0]
		if v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("%s: no status subresource", c.Name)
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil || v.Schema.OpenAPIV3Schema.Properties["spec"].Type != "object" {
			t.Errorf("%s: no spec schema", c.Name)
		}
		if len(v.AdditionalPrinterColumns) == 0 {
			t.Errorf("%s: no printer columns", c.Name)
		}
		got[c.Spec.Names.Kind] = true
	}
	for _, k := range []string{"Backup", "Restore", "Schedule", "BackupStorageLocation", "PodVolumeBackup", "PodVolumeRestore"} {
		if !got[k] {
			t.Errorf("no CRD for %s", k)
		}
	}
}
