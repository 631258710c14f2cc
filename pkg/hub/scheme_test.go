package hub_test

import (
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	servermode "github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/hub"
	hubv1alpha1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1alpha1"
	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// TestOneScheme: server mode's types (its CRDs, ferry.dev/v1alpha1) and
// the hub's (ferry.dev/v1alpha1 and v1beta1) go into one runtime.Scheme,
// each GroupVersionKind to one Go type (AddKnownTypes panics on a second),
// and a client built with it reads the hub's objects.
func TestOneScheme(t *testing.T) {
	s := runtime.NewScheme()
	for name, add := range map[string]func(*runtime.Scheme) error{
		"server mode": servermode.AddToScheme, "hub v1alpha1": hubv1alpha1.AddToScheme, "hub v1beta1": hubv1beta1.AddToScheme,
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("adding %s's types: %v", name, r)
				}
			}()
			if err := add(s); err != nil {
				t.Fatalf("adding %s's types: %v", name, err)
			}
		}()
	}
	for _, kind := range []string{"Backup", "Restore", "Schedule", "BackupStorageLocation"} {
		for version, pkg := range map[string]string{"v1alpha1": "github.com/kubeferry/ferry/pkg/apis/v1alpha1", "v1beta1": "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"} {
			gvk := schema.GroupVersionKind{Group: "ferry.dev", Version: version, Kind: kind}
			obj, err := s.New(gvk)
			if err != nil {
				t.Errorf("%s: %v", gvk, err)
				continue
			}
			if got := reflect.TypeOf(obj).Elem().PkgPath(); got != pkg {
				t.Errorf("%s is a type of %s, want %s", gvk, got, pkg)
			}
		}
	}
	if testing.Short() {
		return
	}
	requireServers(t)
	h := startHub(t, hub.Options{DataDir: t.TempDir()})
	c, err := crclient.New(h.admin, crclient.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	loc := &hubv1beta1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "primary"}, Spec: hubv1beta1.BackupStorageLocationSpec{URL: "file:///var/lib/ferry"}}
	if err := c.Create(ctx, loc); err != nil {
		t.Fatal(err)
	}
	var got hubv1beta1.BackupStorageLocationList
	if err := c.List(ctx, &got, crclient.InNamespace(ns)); err != nil || len(got.Items) != 1 {
		t.Errorf("the hub's locations through the shared scheme: %v, %d", err, len(got.Items))
	}
}
