// Package event is the hub's storage of core/v1 Events: the Events its
// controllers record on Migrations, Backups, Restores and
// BackupStorageLocations, as server mode's controllers do in a cluster,
// so that `kubectl describe` and `kubectl events` show them. Like
// kube-apiserver's, they expire an hour after their last write (an etcd
// lease), and they can be selected by their involved object's fields.
package event

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeferry/ferry/pkg/hub/registry"
)

// TTL is how long an Event is kept after its last write (kube-apiserver's
// --event-ttl default).
const TTL = 3600

var resource = schema.GroupResource{Resource: "events"}

// NewREST returns the storage of Events.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*genericregistry.Store, error) {
	s := strategy{ObjectTyper: scheme, NameGenerator: names.SimpleNameGenerator}
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &corev1.Event{} },
		NewListFunc:               func() runtime.Object { return &corev1.EventList{} },
		PredicateFunc:             predicate,
		DefaultQualifiedResource:  resource,
		SingularQualifiedResource: schema.GroupResource{Resource: "event"},
		TTLFunc:                   func(runtime.Object, uint64, bool) (uint64, error) { return TTL, nil },
		CreateStrategy:            s,
		UpdateStrategy:            s,
		DeleteStrategy:            s,
		TableConvertor:            table,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: attrs}); err != nil {
		return nil, err
	}
	return store, nil
}

// table is kubectl get events' view, as kube-apiserver's: the type, the
// reason, the object and the message.
var table = registry.Table{Columns: []registry.Column{
	{Definition: metav1.TableColumnDefinition{Name: "Type", Type: "string", Description: "type"},
		Cell: func(o runtime.Object) any { return o.(*corev1.Event).Type }},
	{Definition: metav1.TableColumnDefinition{Name: "Reason", Type: "string", Description: "reason"},
		Cell: func(o runtime.Object) any { return o.(*corev1.Event).Reason }},
	{Definition: metav1.TableColumnDefinition{Name: "Object", Type: "string", Description: "involvedObject: kind/name"},
		Cell: func(o runtime.Object) any {
			io := o.(*corev1.Event).InvolvedObject
			return strings.ToLower(io.Kind) + "/" + io.Name
		}},
	{Definition: metav1.TableColumnDefinition{Name: "Message", Type: "string", Description: "message"},
		Cell: func(o runtime.Object) any { return o.(*corev1.Event).Message }},
}}

// SelectableFields are the fields a field selector may name, as
// kube-apiserver's: the involved object's, the reason, the source and the
// type. ConvertFieldLabel accepts them.
var SelectableFields = []string{"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
	"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}

// ConvertFieldLabel is the field label conversion of core/v1 Events.
func ConvertFieldLabel(label, value string) (string, string, error) {
	switch label {
	case "metadata.name", "metadata.namespace":
		return label, value, nil
	}
	for _, f := range SelectableFields {
		if f == label {
			return label, value, nil
		}
	}
	return "", "", fmt.Errorf("field label not supported: %s", label)
}

func attrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return nil, nil, fmt.Errorf("not an Event: %T", obj)
	}
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	f := generic.ObjectMetaFieldsSet(&e.ObjectMeta, true)
	o := e.InvolvedObject
	for k, v := range map[string]string{"involvedObject.kind": o.Kind, "involvedObject.namespace": o.Namespace, "involvedObject.name": o.Name,
		"involvedObject.uid": string(o.UID), "involvedObject.apiVersion": o.APIVersion, "involvedObject.resourceVersion": o.ResourceVersion,
		"involvedObject.fieldPath": o.FieldPath, "reason": e.Reason, "reportingComponent": e.ReportingController, "source": source, "type": e.Type} {
		f[k] = v
	}
	return labels.Set(e.Labels), f, nil
}

func predicate(l labels.Selector, f fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: l, Field: f, GetAttrs: attrs}
}

type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	registry.Basics
}

func (strategy) NamespaceScoped() bool                                            { return true }
func (strategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (strategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

// AllowCreateOnUpdate lets a recorder's update create an Event, as
// kube-apiserver's strategy does.
func (strategy) AllowCreateOnUpdate(context.Context) bool { return true }

func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validate(obj.(*corev1.Event))
}

func (strategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validate(obj.(*corev1.Event))
}

// validate checks what kube-apiserver's validation of a core/v1 Event
// checks: the metadata; for an Event without eventTime (client-go's
// legacy recorder's), an involved object in the Event's namespace (or no
// namespace, in default); for one with eventTime, the reporting
// controller and instance, the action and the reason.
func validate(e *corev1.Event) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&e.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	ns := e.InvolvedObject.Namespace
	mismatch := field.Invalid(field.NewPath("involvedObject", "namespace"), ns, "does not match event.namespace")
	if e.EventTime.IsZero() {
		if (ns == "" && e.Namespace != metav1.NamespaceDefault) || (ns != "" && ns != e.Namespace) {
			errs = append(errs, mismatch)
		}
		return errs
	}
	if ns == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
		errs = append(errs, mismatch)
	}
	for _, f := range []struct{ name, value string }{{"reportingComponent", e.ReportingController}, {"reportingInstance", e.ReportingInstance}, {"action", e.Action}, {"reason", e.Reason}} {
		if f.value == "" {
			errs = append(errs, field.Required(field.NewPath(f.name), "an Event with eventTime names it"))
		}
	}
	return errs
}
