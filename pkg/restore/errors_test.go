package restore

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestValidateNamesFields: each refusal of a restore's spec is a
// *field.Error naming the spec field and the value, not a CLI flag.
func TestValidateNamesFields(t *testing.T) {
	for _, c := range []struct {
		name  string
		spec  v1alpha1.RestoreSpec
		field string
		typ   field.ErrorType
		value any
		msg   string
	}{
		{"no backup", v1alpha1.RestoreSpec{}, "spec.backupName", field.ErrorTypeRequired, "",
			"restore r: spec.backupName: Required value: the backup to restore"},
		{"policy", v1alpha1.RestoreSpec{BackupName: "b", ExistingResourcePolicy: "merge"}, "spec.existingResourcePolicy", field.ErrorTypeNotSupported, v1alpha1.ExistingResourcePolicy("merge"),
			`spec.existingResourcePolicy: Unsupported value: "merge": supported values: "none", "update"`},
		{"to cloud", v1alpha1.RestoreSpec{BackupName: "b", FromCloud: "aws", ToCloud: "oracle"}, "spec.toCloud", field.ErrorTypeInvalid, "oracle", ""},
		{"from cloud", v1alpha1.RestoreSpec{BackupName: "b", FromCloud: "oracle"}, "spec.fromCloud", field.ErrorTypeInvalid, "oracle", ""},
		{"modifiers", v1alpha1.RestoreSpec{BackupName: "b", ResourceModifiers: "version: v9\n"}, "spec.resourceModifiers", field.ErrorTypeInvalid, field.OmitValueType{}, ""},
		{"image mappings", v1alpha1.RestoreSpec{BackupName: "b", ImageRegistryMappings: []string{"nonsense"}}, "spec.imageRegistryMappings", field.ErrorTypeInvalid, []string{"nonsense"}, ""},
		{"push without mappings", v1alpha1.RestoreSpec{BackupName: "b", PushImages: true}, "spec.imageRegistryMappings", field.ErrorTypeRequired, "", ""},
		{"two sources, one target", v1alpha1.RestoreSpec{BackupName: "b", NamespaceMapping: map[string]string{"a": "m", "b": "m"}}, "spec.namespaceMapping[b]", field.ErrorTypeInvalid, "m",
			`spec.namespaceMapping[b]: Invalid value: "m": a is mapped to m too; a target namespace takes one source`},
		{"not a namespace name", v1alpha1.RestoreSpec{BackupName: "b", NamespaceMapping: map[string]string{"a": "Upper"}}, "spec.namespaceMapping[a]", field.ErrorTypeInvalid, "Upper", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &Options{Name: "r", Spec: c.spec}
			err := o.Validate()
			var fe *field.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a *field.Error", err)
			}
			if fe.Field != c.field || fe.Type != c.typ {
				t.Errorf("field %s (%s), want %s (%s): %v", fe.Field, fe.Type, c.field, c.typ, err)
			}
			if s, ok := c.value.([]string); ok {
				if got, _ := fe.BadValue.([]string); len(got) != len(s) || got[0] != s[0] {
					t.Errorf("value %#v, want %#v", fe.BadValue, c.value)
				}
			} else if fe.BadValue != c.value {
				t.Errorf("value %#v, want %#v", fe.BadValue, c.value)
			}
			if c.msg != "" && err.Error() != c.msg {
				t.Errorf("message %q\nwant    %q", err, c.msg)
			}
		})
	}
}

// TestRunKeepsNotFound: a restore of a backup that is not in the location
// fails with an error that is both ErrBackupNotRestorable and, through
// every wrapping, store.ErrNotFound.
func TestRunKeepsNotFound(t *testing.T) {
	ctx := context.Background()
	loc, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	cluster := &kube.Cluster{Config: &rest.Config{Host: "https://target.example"}, Version: &version.Info{GitVersion: "v1.37.0"}}
	for _, fromVelero := range []bool{false, true} {
		r, _, err := Run(ctx, cluster, loc, Options{Name: "r1", Spec: v1alpha1.RestoreSpec{BackupName: "nosuch", FromVelero: fromVelero}})
		if !errors.Is(err, store.ErrNotFound) || !errors.Is(err, ErrBackupNotRestorable) {
			t.Errorf("velero %v: Run = %v, want store.ErrNotFound and ErrBackupNotRestorable", fromVelero, err)
		}
		if r == nil || r.Status.Phase != v1alpha1.PhaseFailed {
			t.Errorf("velero %v: restore %+v, want Failed", fromVelero, r)
		}
	}
}
