// Package schedule is the hub's storage of Schedules: their validation (a
// cron expression robfig/cron parses, runs at least a minute apart, and a
// template that is a valid Backup spec whose Cluster and location exist)
// and their table.
package schedule

import (
	"context"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/registry"
	"github.com/kubeferry/ferry/pkg/hub/registry/backup"
	timing "github.com/kubeferry/ferry/pkg/schedule"
)

// NewREST returns the storage of Schedules and of their status
// subresource. Whether the Cluster and location the template names exist
// is admission's to check (pkg/hub/admission).
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*genericregistry.Store, *registry.StatusREST, error) {
	k := registry.Kind[*ferry.Schedule, ferry.ScheduleSpec, ferry.ScheduleStatus]{
		Resource: "schedules", Singular: "schedule",
		New:            func() runtime.Object { return &ferry.Schedule{} },
		NewList:        func() runtime.Object { return &ferry.ScheduleList{} },
		Spec:           func(s *ferry.Schedule) *ferry.ScheduleSpec { return &s.Spec },
		Status:         func(s *ferry.Schedule) *ferry.ScheduleStatus { return &s.Status },
		Validate:       func(_ context.Context, s *ferry.Schedule) field.ErrorList { return Validate(s) },
		ValidateUpdate: func(_ context.Context, s, _ *ferry.Schedule) field.ErrorList { return Validate(s) },
		Table:          table,
	}
	return k.NewREST(scheme, optsGetter)
}

// Validate checks a Schedule's metadata and spec, but for whether what its
// template names exists.
func Validate(s *ferry.Schedule) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if timing.ValidateName(s.Name) != nil {
		errs = append(errs, field.TooLong(field.NewPath("metadata", "name"), s.Name, timing.MaxNameLength))
	}
	p := field.NewPath("spec", "schedule")
	if s.Spec.Schedule == "" {
		errs = append(errs, field.Required(p, `a cron expression, such as "0 */6 * * *" or "@every 6h"`))
	} else if _, err := timing.Parse(s.Spec.Schedule); err != nil {
		errs = append(errs, field.Invalid(p, s.Spec.Schedule, err.Error()))
	}
	return append(errs, backup.ValidateSpec(&s.Spec.Template, field.NewPath("spec", "template"))...)
}

// table is `kubectl get schedules`.
var table = registry.Table{Columns: []registry.Column{
	{Definition: metav1.TableColumnDefinition{Name: "Schedule", Type: "string", Description: "spec.schedule"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Schedule).Spec.Schedule }},
	{Definition: metav1.TableColumnDefinition{Name: "Cluster", Type: "string", Description: "spec.template.cluster"},
		Cell: func(o runtime.Object) any { return o.(*ferry.Schedule).Spec.Template.Cluster }},
	{Definition: metav1.TableColumnDefinition{Name: "Phase", Type: "string", Description: "status.phase"},
		Cell: func(o runtime.Object) any { return string(o.(*ferry.Schedule).Status.Phase) }},
	{Definition: metav1.TableColumnDefinition{Name: "Last Backup", Type: "string", Description: "time since status.lastBackup"},
		Cell: func(o runtime.Object) any { return registry.Since(o.(*ferry.Schedule).Status.LastBackup) }},
	{Definition: metav1.TableColumnDefinition{Name: "Next", Type: "string", Description: "status.nextBackup"},
		Cell: func(o runtime.Object) any {
			if t := o.(*ferry.Schedule).Status.NextBackup; t != nil {
				return t.UTC().Format("2006-01-02T15:04:05Z")
			}
			return "<none>"
		}},
}}
