package registry

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
)

func TestValidateImmutable(t *testing.T) {
	yes, no := true, false
	old := ferry.MigrationSpec{Source: ferry.ClusterReference{Cluster: "old"}, Verify: &yes,
		Backup: ferry.MigrationBackup{IncludedNamespaces: []string{"a"}, TTL: &metav1.Duration{}}}
	same := *old.DeepCopy()
	if errs := ValidateImmutable(&same, &old, field.NewPath("spec"), "why"); len(errs) != 0 {
		t.Errorf("an equal spec: %v", errs)
	}
	changed := *old.DeepCopy()
	changed.Source.Cluster = "other"
	changed.Verify = &no
	changed.Backup.IncludedNamespaces = []string{"b"}
	changed.Volumes = true
	errs := ValidateImmutable(&changed, &old, field.NewPath("spec"), "a Migration runs once")
	var paths []string
	for _, e := range errs {
		paths = append(paths, e.Field)
		if e.Type != field.ErrorTypeForbidden || !strings.Contains(e.Detail, "a Migration runs once") {
			t.Errorf("%s: %v, want Forbidden with the reason", e.Field, e)
		}
	}
	if got, want := strings.Join(paths, " "), "spec.source.cluster spec.backup.includedNamespaces spec.volumes spec.verify"; got != want {
		t.Errorf("refused %q, want %q", got, want)
	}
	nilVerify := *old.DeepCopy()
	nilVerify.Verify = nil
	if errs := ValidateImmutable(&nilVerify, &old, field.NewPath("spec"), "why"); len(errs) != 1 || errs[0].Field != "spec.verify" {
		t.Errorf("unset spec.verify: %v", errs)
	}
}
