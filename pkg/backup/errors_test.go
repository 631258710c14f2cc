package backup

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// TestPrepareNamesFields: each refusal of a backup's spec is a
// *field.Error naming the spec field and the value, not a CLI flag.
func TestPrepareNamesFields(t *testing.T) {
	for _, c := range []struct {
		name  string
		spec  v1alpha1.BackupSpec
		field string
		typ   field.ErrorType
		msg   string
	}{
		{"images", v1alpha1.BackupSpec{Images: "all"}, "spec.images", field.ErrorTypeNotSupported,
			`spec.images: Unsupported value: "all": supported values: "none", "record", "copy", "bundle"`},
		{"copy without mappings", v1alpha1.BackupSpec{Images: "copy"}, "spec.imageRegistryMappings", field.ErrorTypeRequired,
			`spec.imageRegistryMappings: Required value: spec.images "copy" needs the target registries (OLD=NEW)`},
		{"image mappings", v1alpha1.BackupSpec{ImageRegistryMappings: []string{"nonsense"}}, "spec.imageRegistryMappings", field.ErrorTypeInvalid, ""},
		{"cluster resources", v1alpha1.BackupSpec{IncludeClusterResources: "maybe"}, "spec.includeClusterResources", field.ErrorTypeNotSupported,
			`spec.includeClusterResources: Unsupported value: "maybe": supported values: "auto", "true", "false"`},
		{"label selector", v1alpha1.BackupSpec{LabelSelector: "a b c"}, "spec.labelSelector", field.ErrorTypeInvalid, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &Options{Name: "b", Spec: c.spec}
			_, _, _, err := o.prepare()
			var fe *field.Error
			if !errors.As(err, &fe) {
				t.Fatalf("prepare = %v, want a *field.Error", err)
			}
			if fe.Field != c.field || fe.Type != c.typ {
				t.Errorf("field %s (%s), want %s (%s): %v", fe.Field, fe.Type, c.field, c.typ, err)
			}
			if c.msg != "" && err.Error() != c.msg {
				t.Errorf("message %q\nwant    %q", err, c.msg)
			}
		})
	}
}
