package restore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/hooks"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/transform"
)

// hookPlan is a plan of one ConfigMap in each of n namespaces, ns-0 ..
// ns-<n-1>, and the pods: a hooked pod of this restore in ns-3, a hooked
// pod of this restore in a namespace the plan does not have, and a hooked
// pod in ns-4 that this restore did not bring.
func hookPlan(n int) (*Plan, []runtime.Object) {
	p := &Plan{}
	for i := range n {
		ai := &archive.Item{Entry: archive.Entry{Resource: "configmaps", Namespace: fmt.Sprintf("ns-%d", i), Name: "c"}}
		p.Items = append(p.Items, &Item{Item: ai, GroupResource: "configmaps"})
	}
	pod := func(ns, name string, ours bool) *corev1.Pod {
		labels := map[string]string{}
		if ours {
			labels[v1alpha1.LabelRestore] = transform.LabelValue("r1")
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
			Annotations: map[string]string{hooks.FerryPostRestore + hooks.KeyCommand: `["true"]`}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	}
	return p, []runtime.Object{pod("ns-3", "ours", true), pod("elsewhere", "ours-too", true), pod("ns-4", "not-ours", false)}
}

// A restore into many namespaces looks for its post-restore hooks with
// one LIST of pods, not one per namespace: at 200 namespaces the
// per-namespace LISTs took 18 s of a 92 s restore (bench/load), while the
// API server was busy with the controllers' work on what was restored.
func TestRestoreHooksOneList(t *testing.T) {
	plan, pods := hookPlan(50)
	client := fake.NewClientset(pods...)
	lists := 0
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		return false, nil, nil
	})
	o := &Options{Name: "r1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	results := &report.Results{}
	todo := findRestoreHooks(context.Background(), &kube.Cluster{Typed: client}, plan, o, results)
	if lists != 1 {
		t.Errorf("pod LISTs = %d, want 1", lists)
	}
	if len(todo) != 1 || todo[0].pod.Namespace != "ns-3" || todo[0].pod.Name != "ours" {
		t.Errorf("hooks found = %v, want ns-3/ours only", podNames(todo))
	}
	if len(results.Warnings)+len(results.Errors) != 0 {
		t.Errorf("warnings %v, errors %v", results.Warnings, results.Errors)
	}
}

// A user who may list pods only in the restored namespaces (namespaced
// RBAC) still gets the hooks run: a refused cluster-wide LIST falls back
// to one LIST per namespace.
func TestRestoreHooksNamespacedFallback(t *testing.T) {
	plan, pods := hookPlan(5)
	client := fake.NewClientset(pods...)
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("cluster-wide list not allowed"))
		}
		return false, nil, nil
	})
	o := &Options{Name: "r1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	results := &report.Results{}
	todo := findRestoreHooks(context.Background(), &kube.Cluster{Typed: client}, plan, o, results)
	if len(todo) != 1 || todo[0].pod.Namespace != "ns-3" || todo[0].pod.Name != "ours" {
		t.Errorf("hooks found = %v, want ns-3/ours only", podNames(todo))
	}
	if len(results.Warnings)+len(results.Errors) != 0 {
		t.Errorf("warnings %v, errors %v", results.Warnings, results.Errors)
	}
}

func podNames(todo []podHook) []string {
	var out []string
	for _, ph := range todo {
		out = append(out, ph.pod.Namespace+"/"+ph.pod.Name)
	}
	return out
}
