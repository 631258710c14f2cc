package migration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/pkg/hooks"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/store"
)

// hookedPod is a running pod of namespace shop with a pre and a post
// hook, controlled by kind/owner ("" for a bare pod).
func hookedPod(name, kind, owner, preCmd string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Annotations: map[string]string{
		hooks.FerryPreBackup + hooks.KeyCommand:  preCmd,
		hooks.FerryPostBackup + hooks.KeyCommand: "unfreeze",
	}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if kind != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: owner, Controller: &yes, APIVersion: "apps/v1"}}
	}
	return p
}

// recordHooks replaces runHook for a test: it records each command run
// as pod:command, and fails a command named "fail".
func recordHooks(t *testing.T) func() []string {
	var mu sync.Mutex
	var ran []string
	was := runHook
	runHook = func(_ context.Context, _ *rest.Config, p *corev1.Pod, h *hooks.ExecHook) hooks.Result {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, p.Name+":"+strings.Join(h.Command, " "))
		r := hooks.Result{Pod: p.Namespace + "/" + p.Name}
		if h.Command[0] == "fail" {
			r.Err = errors.New("exit code 1")
		}
		return r
	}
	t.Cleanup(func() { runHook = was })
	return func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(ran) }
}

// TestQuiesceHooks: the quiesce runs the pre hooks of the pods it stops
// (those of ReplicaSets and StatefulSets) and not of the pods that keep
// running (a bare pod's hooks run around the final backup's snapshot of
// it, as any backup's). When a pre hook fails, the pods whose pre hook
// ran get their post hook, and nothing is scaled: no database is left
// frozen.
func TestQuiesceHooks(t *testing.T) {
	ctx := context.Background()
	two, one := int32(2), int32(1)
	run := func(t *testing.T, dbPre string) (*Journal, []string, *appsv1.Deployment, error) {
		ran := recordHooks(t)
		src := fakeClient([]any{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: &two}},
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}, Spec: appsv1.StatefulSetSpec{Replicas: &one}},
			hookedPod("web-1", "ReplicaSet", "web-abc", "freeze"), hookedPod("db-0", "StatefulSet", "db", dbPre),
			hookedPod("tool", "", "", "freeze"),
		})
		loc, err := store.Open(ctx, "file://"+t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { loc.Close() })
		o := &Options{Name: "m", Source: &kube.Cluster{Typed: src, Config: &rest.Config{}}, Location: loc}
		o.complete()
		j := &Journal{Name: "m", Cutover: &CutoverRecord{Step: CutoverPredicted}}
		j.Backup.IncludedNamespaces = []string{"shop"}
		qerr := quiesce(ctx, o, CutoverOptions{QuiesceTimeout: time.Second}, j)
		d, _ := src.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
		return j, ran(), d, qerr
	}
	t.Run("a pre hook fails", func(t *testing.T) {
		j, ran, web, err := run(t, "fail")
		if err == nil || !strings.Contains(err.Error(), "nothing was quiesced") {
			t.Fatalf("quiesce with a failing pre hook: %v", err)
		}
		if want := []string{"db-0:fail", "web-1:freeze", "web-1:unfreeze"}; !slices.Equal(sorted(ran), want) {
			t.Errorf("hooks run %v, want %v (web-1 unfrozen; the bare pod untouched)", ran, want)
		}
		if *web.Spec.Replicas != 2 || j.Cutover.Step != CutoverPredicted {
			t.Errorf("after a failed pre hook: web at %d, step %s", *web.Spec.Replicas, j.Cutover.Step)
		}
	})
	t.Run("every pre hook runs", func(t *testing.T) {
		j, ran, web, _ := run(t, "flush")
		// The fake cluster's pods never go: the quiesce times out
		// waiting, and the pods it froze are unfrozen.
		if want := []string{"db-0:flush", "db-0:unfreeze", "web-1:freeze", "web-1:unfreeze"}; !slices.Equal(sorted(ran), want) {
			t.Errorf("hooks run %v, want %v", ran, want)
		}
		if *web.Spec.Replicas != 0 || j.Cutover.Hooks != 2 {
			t.Errorf("web at %d, hooks recorded %d", *web.Spec.Replicas, j.Cutover.Hooks)
		}
	})
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestCutoverPreHookFails: a cutover whose pre hook fails changed
// nothing, so it leaves no cutover in the journal (stages may run again,
// nothing to roll back).
func TestCutoverPreHookFails(t *testing.T) {
	ctx := context.Background()
	recordHooks(t)
	src := fakeClient([]any{hookedPod("db-0", "StatefulSet", "db", "fail")})
	loc, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	j := &Journal{Name: "m", Cutovers: 1, Cutover: &CutoverRecord{Name: "m-cutover-1", Step: CutoverPredicted}}
	j.Backup.IncludedNamespaces = []string{"shop"}
	if err := j.save(ctx, loc); err != nil {
		t.Fatal(err)
	}
	o := Options{Name: "m", Location: loc, Source: &kube.Cluster{Name: "src", Typed: src, Config: &rest.Config{Host: "https://src"}},
		Target: &kube.Cluster{Name: "dst", Typed: fakeClient(nil), Config: &rest.Config{Host: "https://dst"}}}
	if _, _, err := Cutover(ctx, o, CutoverOptions{}); err == nil || !strings.Contains(err.Error(), "nothing was quiesced") {
		t.Fatalf("cutover with a failing pre hook: %v", err)
	}
	got, err := LoadJournal(ctx, loc, "m")
	if err != nil || got.Cutover != nil {
		t.Errorf("journal after a cutover that changed nothing: %+v %v", got.Cutover, err)
	}
}
