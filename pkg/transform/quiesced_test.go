package transform

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// TestQuiesced: a workload the cutover scaled to zero is restored at its
// recorded count (in the mapped namespace), a CronJob unsuspended as it
// was, each with a note; others are untouched.
func TestQuiesced(t *testing.T) {
	three, no := int32(3), false
	c := &Context{NamespaceMapping: map[string]string{"shop": "shop2"}, Quiesced: []v1alpha1.QuiescedWorkload{
		{Kind: "StatefulSet", Namespace: "shop", Name: "db", Replicas: &three},
		{Kind: "CronJob", Namespace: "shop", Name: "nightly", Suspended: &no},
	}}
	sts := obj(t, `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"namespace":"shop2","name":"db"},"spec":{"replicas":0}}`)
	notes := Apply(c, "apps", sts)
	if n, _, _ := unstructured.NestedInt64(sts.Object, "spec", "replicas"); n != 3 || !strings.Contains(strings.Join(notes, ";"), "spec.replicas 0 -> 3") {
		t.Errorf("StatefulSet: replicas %d, notes %q", n, notes)
	}
	cj := obj(t, `{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"namespace":"shop2","name":"nightly"},"spec":{"suspend":true}}`)
	Apply(c, "batch", cj)
	if s, _, _ := unstructured.NestedBool(cj.Object, "spec", "suspend"); s {
		t.Error("CronJob left suspended")
	}
	other := obj(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop2","name":"db"},"spec":{"replicas":0}}`)
	Apply(c, "apps", other)
	if n, _, _ := unstructured.NestedInt64(other.Object, "spec", "replicas"); n != 0 {
		t.Errorf("a Deployment of another name was scaled to %d", n)
	}
}
