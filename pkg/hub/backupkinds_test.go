package hub_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

func ferryGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "ferry.dev", Version: "v1beta1", Resource: resource}
}

// testBackupKinds: server mode's kinds in the hub. Invalid ones are
// refused at create with their field paths; valid ones get their defaults
// and phase New; a status update keeps the spec.
func testBackupKinds(t *testing.T, c dynamic.Interface) {
	ctx := context.Background()
	mk := func(kind, name string, spec map[string]any) *unstructured.Unstructured {
		return obj("ferry.dev/v1beta1", kind, name, map[string]any{"spec": spec})
	}
	create := func(resource string, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return c.Resource(ferryGVR(resource)).Namespace(ns).Create(ctx, o, metav1.CreateOptions{})
	}
	if _, err := create("backupstoragelocations", mk("BackupStorageLocation", "primary", map[string]any{"url": "file:///var/lib/ferry", "default": true})); err != nil {
		t.Fatal(err)
	}
	b, err := create("backups", mk("Backup", "valid", map[string]any{"cluster": "old"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create("backups", mk("Backup", "in-primary", map[string]any{"cluster": "old", "storageLocationName": "primary"})); err != nil {
		t.Fatal(err)
	}
	images, _, _ := unstructured.NestedString(b.Object, "spec", "images")
	phase, _, _ := unstructured.NestedString(b.Object, "status", "phase")
	if images != "record" || phase != "New" {
		t.Errorf("a new Backup: spec.images %q, status.phase %q; want record, New", images, phase)
	}
	cases := []struct {
		resource string
		o        *unstructured.Unstructured
		want     string
	}{
		{"backupstoragelocations", mk("BackupStorageLocation", "second-default", map[string]any{"url": "file:///x", "default": true}), "spec.default"},
		{"backupstoragelocations", mk("BackupStorageLocation", "ftp", map[string]any{"url": "ftp://x"}), "spec.url"},
		{"backupstoragelocations", mk("BackupStorageLocation", "file-keys", map[string]any{"url": "file:///x", "credentialRef": map[string]any{"name": "keys"}}), "spec.credentialRef"},
		{"backupstoragelocations", mk("BackupStorageLocation", "no-identity", map[string]any{"url": "s3://b", "encryption": map[string]any{"recipients": []any{"age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"}}}), "spec.encryption.identityRef"},
		{"backupstoragelocations", mk("BackupStorageLocation", "bad-recipient", map[string]any{"url": "s3://b", "encryption": map[string]any{"recipients": []any{"age1nope"}, "identityRef": map[string]any{"name": "k", "key": "key.txt"}}}), "spec.encryption.recipients[0]"},
		{"backups", mk("Backup", "unknown-cluster", map[string]any{"cluster": "nowhere"}), "spec.cluster"},
		{"backups", mk("Backup", "unknown-location", map[string]any{"cluster": "old", "storageLocationName": "nowhere"}), "spec.storageLocationName"},
		{"backups", mk("Backup", "ttl", map[string]any{"cluster": "old", "ttl": "-1h"}), "spec.ttl"},
		{"backups", mk("Backup", "glob", map[string]any{"cluster": "old", "includedNamespaces": []any{"shop", "team-["}}), "spec.includedNamespaces[1]"},
		{"backups", mk("Backup", "copy", map[string]any{"cluster": "old", "images": "copy"}), "spec.imageRegistryMappings"},
		{"restores", mk("Restore", "unknown-backup", map[string]any{"cluster": "new", "backupName": "nowhere"}), "spec.backupName"},
		{"restores", mk("Restore", "cloud", map[string]any{"cluster": "new", "backupName": "valid", "fromCloud": "marscloud"}), "spec.fromCloud"},
		{"restores", mk("Restore", "mapping", map[string]any{"cluster": "new", "backupName": "valid", "namespaceMapping": map[string]any{"shop": "Shop_2"}}), "spec.namespaceMapping[shop]"},
		{"schedules", mk("Schedule", "not-cron", map[string]any{"schedule": "not cron", "template": map[string]any{"cluster": "old"}}), "spec.schedule"},
		{"schedules", mk("Schedule", "too-often", map[string]any{"schedule": "@every 1s", "template": map[string]any{"cluster": "old"}}), "spec.schedule"},
		{"schedules", mk("Schedule", "template", map[string]any{"schedule": "@hourly", "template": map[string]any{"cluster": "nowhere"}}), "spec.template.cluster"},
	}
	for _, tc := range cases {
		_, err := create(tc.resource, tc.o)
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s %s: got %v, want 422 Invalid", tc.resource, tc.o.GetName(), err)
			continue
		}
		var fields []string
		for _, cause := range err.(apierrors.APIStatus).Status().Details.Causes {
			fields = append(fields, cause.Field)
		}
		if !slices.Equal(fields, []string{tc.want}) {
			t.Errorf("%s %s: refused on fields %v, want [%s] (%v)", tc.resource, tc.o.GetName(), fields, tc.want, err)
		}
	}
	// A status update keeps the spec.
	_ = unstructured.SetNestedField(b.Object, "Completed", "status", "phase")
	_ = unstructured.SetNestedField(b.Object, "new", "spec", "cluster")
	got, err := c.Resource(ferryGVR("backups")).Namespace(ns).UpdateStatus(ctx, b, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cluster, _, _ := unstructured.NestedString(got.Object, "spec", "cluster")
	phase, _, _ = unstructured.NestedString(got.Object, "status", "phase")
	if cluster != "old" || phase != "Completed" || got.GetGeneration() != 1 {
		t.Errorf("after a status update: spec.cluster %q, status.phase %q, generation %d; want old, Completed, 1", cluster, phase, got.GetGeneration())
	}
	// The spec of a Backup or Restore is fixed once created.
	edit := got.DeepCopy()
	_ = unstructured.SetNestedField(edit.Object, "primary", "spec", "storageLocationName")
	_, err = c.Resource(ferryGVR("backups")).Namespace(ns).Update(ctx, edit, metav1.UpdateOptions{})
	if fields := causeFields(err); !apierrors.IsInvalid(err) || !slices.Equal(fields, []string{"spec.storageLocationName"}) {
		t.Errorf("an edit of a Completed Backup's spec: %v (fields %v), want 422 naming spec.storageLocationName", err, fields)
	}
	r, err := create("restores", mk("Restore", "fixed", map[string]any{"cluster": "new", "backupName": "valid"}))
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(r.Object, "in-primary", "spec", "backupName")
	_, err = c.Resource(ferryGVR("restores")).Namespace(ns).Update(ctx, r, metav1.UpdateOptions{})
	if fields := causeFields(err); !apierrors.IsInvalid(err) || !slices.Equal(fields, []string{"spec.backupName"}) {
		t.Errorf("an edit of a Restore's spec: %v (fields %v), want 422 naming spec.backupName", err, fields)
	}
	// Not at v1alpha1: ferry.dev/v1alpha1 Backup is server mode's CRD.
	alpha := ferryGVR("backups")
	alpha.Version = "v1alpha1"
	if _, err := c.Resource(alpha).Namespace(ns).Get(ctx, "valid", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Backup at v1alpha1: %v, want 404 (the hub serves server mode's kinds at v1beta1 only)", err)
	}
}

// testOneDefault: of eight concurrent creates of a default
// BackupStorageLocation in one namespace, exactly one is accepted; the
// others are refused at spec.default, naming the one that is.
func testOneDefault(t *testing.T, clients ...dynamic.Interface) {
	ctx := context.Background()
	r := clients[0].Resource(ferryGVR("backupstoragelocations")).Namespace("race")
	errs := make(chan error, 8)
	start := make(chan struct{})
	for i := range 8 {
		r := clients[i%len(clients)].Resource(ferryGVR("backupstoragelocations")).Namespace("race")
		go func() {
			<-start
			_, err := r.Create(ctx, obj("ferry.dev/v1beta1", "BackupStorageLocation", fmt.Sprintf("d%d", i), map[string]any{"spec": map[string]any{"url": "file:///var/lib/ferry", "default": true}}), metav1.CreateOptions{})
			errs <- err
		}()
	}
	close(start)
	accepted := 0
	for range 8 {
		err := <-errs
		switch {
		case err == nil:
			accepted++
		case !apierrors.IsInvalid(err) || !slices.Equal(causeFields(err), []string{"spec.default"}):
			t.Errorf("a refused default location: %v, want 422 at spec.default", err)
		}
	}
	l, err := r.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if accepted != 1 || len(l.Items) != 1 {
		t.Errorf("%d of 8 concurrent default locations accepted, %d stored; want exactly one", accepted, len(l.Items))
	}
}
