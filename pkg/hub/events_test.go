package hub_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// testEvents: the hub serves core/v1 Events at /api/v1, as kube-apiserver
// does, so that its controllers record Events on its objects and kubectl
// describe finds them: by the involved object's fields (the selector
// kubectl describe sends), patched as a recorder counts a repeat, read by
// a viewer but written only by the admin, and refused when the involved
// object is in another namespace.
func testEvents(t *testing.T, admin, viewer *rest.Config) {
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(admin)
	now := metav1.NewTime(time.Now())
	ev := func(name, involved, involvedNS string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			InvolvedObject: corev1.ObjectReference{APIVersion: "ferry.dev/v1beta1", Kind: "Migration", Namespace: involvedNS, Name: involved, UID: types.UID("uid-" + involved)},
			Reason:         "Started", Message: "backing up", Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "ferry-hub"},
			FirstTimestamp: now, LastTimestamp: now, Count: 1}
	}
	for _, e := range []*corev1.Event{ev("shop.1", "shop", ns), ev("other.1", "other", ns)} {
		if _, err := cs.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Event %s: %v", e.Name, err)
		}
	}
	sel := "involvedObject.name=shop,involvedObject.namespace=" + ns + ",involvedObject.kind=Migration,involvedObject.uid=uid-shop"
	list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "shop.1" {
		t.Fatalf("Events of Migration shop (%s): %v, %+v; want shop.1 only", sel, err, list)
	}
	patched, err := cs.CoreV1().Events(ns).Patch(ctx, "shop.1", types.StrategicMergePatchType, []byte(`{"count":2,"message":"backing up again"}`), metav1.PatchOptions{})
	if err != nil || patched.Count != 2 {
		t.Errorf("a recorder's patch of a repeated Event: %v, count %d", err, patched.Count)
	}
	if _, err := cs.CoreV1().Events(ns).Create(ctx, ev("elsewhere.1", "shop", "kube-system"), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("an Event of an object in another namespace: %v, want Invalid", err)
	}
	series := ev("series.1", "shop", ns)
	series.EventTime = metav1.NewMicroTime(time.Now())
	if _, err := cs.CoreV1().Events(ns).Create(ctx, series, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("an Event with eventTime and no reporting controller, instance or action: %v, want Invalid", err)
	}
	if _, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nope=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("a field selector on a field Events do not have: %v, want BadRequest", err)
	}
	vc := kubernetes.NewForConfigOrDie(viewer)
	if l, err := vc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 2 {
		t.Errorf("a viewer lists Events: %v, %d items", err, len(l.Items))
	}
	if _, err := vc.CoreV1().Events(ns).Create(ctx, ev("by-viewer.1", "shop", ns), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a viewer creates an Event: %v, want Forbidden", err)
	}
}
