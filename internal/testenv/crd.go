package testenv

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	nsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// waitEstablished polls the CRD created from m until its Established
// condition is True, and returns it as last read. It fails at once when
// NamesAccepted is False (the names clash with another CRD), and after
// crdEstablishTimeout or when ctx ends. The error names the file and CRD.
func (a *applier) waitEstablished(ctx context.Context, m manifest, created *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(ctx, crdEstablishTimeout)
	defer cancel()
	name := created.GetName()
	last := created
	for {
		if status, msg := crdCondition(last, "NamesAccepted"); status == "False" {
			return nil, fmt.Errorf("testenv: apply: %s: names not accepted: %s", describe(m), msg)
		}
		if status, _ := crdCondition(last, "Established"); status == "True" {
			return last, nil
		}
		select {
		case <-ctx.Done():
			_, msg := crdCondition(last, "Established")
			return nil, fmt.Errorf("testenv: apply: %s: not Established (%s): %w", describe(m), msg, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		got, err := a.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				continue // reported by the select above
			}
			return nil, fmt.Errorf("testenv: apply: %s: read back: %w", describe(m), err)
		}
		last = got
	}
}

// crdCondition returns status and message of condition typ of a CRD.
func crdCondition(crd *unstructured.Unstructured, typ string) (status, message string) {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]interface{})
		if !ok || cm["type"] != typ {
			continue
		}
		status, _ = cm["status"].(string)
		message, _ = cm["message"].(string)
		return status, message
	}
	return "", "no " + typ + " condition yet"
}
