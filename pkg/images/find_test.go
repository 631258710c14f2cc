package images

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// workloads returns one object of every workload kind, each with an init,
// a regular and an ephemeral container (ephemeral only where the API has
// them: Pods) named after its kind.
func workloads(img func(kind, field string) string) []map[string]any {
	podSpec := func(kind string, ephemeral bool) map[string]any {
		s := map[string]any{
			"initContainers": []any{map[string]any{"name": "init", "image": img(kind, "initContainers")}},
			"containers":     []any{map[string]any{"name": "app", "image": img(kind, "containers")}},
		}
		if ephemeral {
			s["ephemeralContainers"] = []any{map[string]any{"name": "debug", "image": img(kind, "ephemeralContainers")}}
		}
		return s
	}
	tpl := func(kind string) map[string]any {
		return map[string]any{"template": map[string]any{"spec": podSpec(kind, false)}}
	}
	obj := func(apiVersion, kind string, spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"namespace": "shop", "name": strings.ToLower(kind)}, "spec": spec}
	}
	return []map[string]any{
		obj("v1", "Pod", podSpec("Pod", true)),
		obj("v1", "ReplicationController", tpl("ReplicationController")),
		obj("apps/v1", "Deployment", tpl("Deployment")),
		obj("apps/v1", "ReplicaSet", tpl("ReplicaSet")),
		obj("apps/v1", "StatefulSet", tpl("StatefulSet")),
		obj("apps/v1", "DaemonSet", tpl("DaemonSet")),
		obj("batch/v1", "Job", tpl("Job")),
		obj("batch/v1", "CronJob", map[string]any{"schedule": "* * * * *", "jobTemplate": map[string]any{"spec": tpl("CronJob")}}),
	}
}

func TestFindEveryWorkloadKind(t *testing.T) {
	img := func(kind, field string) string {
		return "old.io/ns/" + strings.ToLower(kind) + "-" + strings.ToLower(field) + ":1"
	}
	total := 0
	for _, o := range workloads(img) {
		kind := o["kind"].(string)
		found := Find(o)
		want := 2
		if kind == "Pod" {
			want = 3
		}
		if len(found) != want {
			t.Errorf("%s: found %d images, want %d: %v", kind, len(found), want, found)
		}
		for _, f := range found {
			if f.Reference != img(kind, f.Use.Field) || f.Use.Kind != kind || f.Use.Namespace != "shop" || f.Use.Name != strings.ToLower(kind) {
				t.Errorf("%s: wrong find %+v", kind, f)
			}
		}
		total += len(found)
	}
	if total != 17 {
		t.Errorf("found %d images in all, want 17", total)
	}
	if got := Find(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"image": "x"}}); got != nil {
		t.Errorf("ConfigMap: found %v", got)
	}
	// A kind of the same name in another group is not a workload.
	if got := Find(map[string]any{"apiVersion": "example.com/v1", "kind": "Deployment", "spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "a", "image": "x"}}}}}}); got != nil {
		t.Errorf("example.com Deployment: found %v", got)
	}
}

func TestRewriteObjectEveryKind(t *testing.T) {
	ms, err := ParseMappings([]string{"old.io/ns=new.io/mirror"})
	if err != nil {
		t.Fatal(err)
	}
	rw := NewRewriter(ms, map[string]string{"old.io/ns/deployment-containers:1": dg})
	img := func(kind, field string) string {
		if field == "initContainers" {
			return "quay.io/other/" + strings.ToLower(kind) + ":1" // matches no mapping
		}
		return "old.io/ns/" + strings.ToLower(kind) + "-" + strings.ToLower(field) + ":1"
	}
	for _, o := range workloads(img) {
		kind := o["kind"].(string)
		notes, errs := RewriteObject(rw, o)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", kind, errs)
		}
		data, _ := json.Marshal(o)
		for _, f := range Find(o) {
			want := "new.io/mirror/" + strings.ToLower(kind) + "-" + strings.ToLower(f.Use.Field) + ":1"
			if f.Use.Field == "initContainers" {
				want = img(kind, f.Use.Field)
			}
			if kind == "Deployment" && f.Use.Field == "containers" {
				want += "@" + dg
			}
			if f.Reference != want {
				t.Errorf("%s %s: image %q, want %q (%s)", kind, f.Use.Field, f.Reference, want, data)
			}
		}
		if want := len(Find(o)) - 1; len(notes) != want {
			t.Errorf("%s: %d notes, want %d: %v", kind, len(notes), want, notes)
		}
	}
}

func TestRewriteObjectMalformed(t *testing.T) {
	ms, _ := ParseMappings([]string{"old.io=new.io"})
	o := workloads(func(kind, field string) string {
		if field == "initContainers" {
			return "old.io/BAD image"
		}
		return "old.io/ns/app:1"
	})[2]
	notes, errs := RewriteObject(NewRewriter(ms, nil), o)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `Deployment shop/deployment initContainers[init]`) || !strings.Contains(errs[0].Error(), `"old.io/BAD image"`) {
		t.Fatalf("errs = %v, want one naming the object, container and image", errs)
	}
	if len(notes) != 1 || fmt.Sprint(Find(o)[1].Reference) != "new.io/ns/app:1" {
		t.Errorf("the good image was not rewritten: %v %v", notes, Find(o))
	}
	if Find(o)[0].Reference != "old.io/BAD image" {
		t.Errorf("the malformed image was changed: %v", Find(o)[0])
	}
	if _, err := Find(o)[0].Parse(); err == nil || !strings.Contains(err.Error(), "Deployment shop/deployment") {
		t.Errorf("Found.Parse: %v", err)
	}
}
