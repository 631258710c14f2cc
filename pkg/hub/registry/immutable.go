package registry

import (
	"reflect"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateImmutable refuses every change from old to obj, two specs of one
// type, naming each changed field at its deepest struct path under p (by
// its JSON name, as the preferred version spells it), with why: the specs
// of the kinds run once (Migrations, Backups, Restores) describe what was
// run, so that their status never describes another spec.
func ValidateImmutable(obj, old any, p *field.Path, why string) field.ErrorList {
	return immutable(reflect.ValueOf(obj), reflect.ValueOf(old), p, why)
}

func immutable(a, b reflect.Value, p *field.Path, why string) field.ErrorList {
	if apiequality.Semantic.DeepEqual(a.Interface(), b.Interface()) {
		return nil
	}
	for a.Kind() == reflect.Pointer && !a.IsNil() && !b.IsNil() {
		a, b = a.Elem(), b.Elem()
	}
	if a.Kind() != reflect.Struct {
		return field.ErrorList{field.Forbidden(p, "field is immutable: "+why)}
	}
	var errs field.ErrorList
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		child := p
		switch name {
		case "-":
			continue
		case "":
			if !f.Anonymous {
				child = p.Child(f.Name)
			}
		default:
			child = p.Child(name)
		}
		errs = append(errs, immutable(a.Field(i), b.Field(i), child, why)...)
	}
	return errs
}
