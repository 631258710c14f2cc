package hooks

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

func annotated(ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: ann},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "first", Image: "img"}, {Name: "second", Image: "img"},
		}},
	}
}

func TestBackupHooksParse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ann       map[string]string
		pre, post *ExecHook
	}{
		{name: "none", ann: map[string]string{"other": "x"}},
		{
			name: "JSON array, defaults",
			ann:  map[string]string{"pre.hook.backup.velero.io/command": `["/bin/sh", "-c", "echo hi"]`},
			pre: &ExecHook{Phase: PhasePreBackup, Container: "first", Command: []string{"/bin/sh", "-c", "echo hi"},
				OnError: OnErrorFail, Timeout: 30 * time.Second, Source: VeleroPreBackup},
		},
		{
			name: "plain string, all set",
			ann: map[string]string{
				"post.hook.backup.velero.io/command":   " /usr/bin/sync \n",
				"post.hook.backup.velero.io/container": "second",
				"post.hook.backup.velero.io/on-error":  "Continue",
				"post.hook.backup.velero.io/timeout":   "2m",
			},
			post: &ExecHook{Phase: PhasePostBackup, Container: "second", Command: []string{"/usr/bin/sync"},
				OnError: OnErrorContinue, Timeout: 2 * time.Minute, Source: VeleroPostBackup},
		},
		{
			name: "ferry's prefix wins whole",
			ann: map[string]string{
				"pre.hook.backup.velero.io/command":   "velero-cmd",
				"pre.hook.backup.velero.io/container": "second",
				"pre.hook.backup.velero.io/on-error":  "Continue",
				"pre.hook.backup.ferry.dev/command":   `["ferry-cmd"]`,
				"pre.hook.backup.ferry.dev/timeout":   "5s",
				"post.hook.backup.velero.io/command":  "velero-post",
			},
			pre: &ExecHook{Phase: PhasePreBackup, Container: "first", Command: []string{"ferry-cmd"},
				OnError: OnErrorFail, Timeout: 5 * time.Second, Source: FerryPreBackup},
			post: &ExecHook{Phase: PhasePostBackup, Container: "first", Command: []string{"velero-post"},
				OnError: OnErrorFail, Timeout: 30 * time.Second, Source: VeleroPostBackup},
		},
		{
			name: "Velero's legacy unphased keys are a pre hook",
			ann:  map[string]string{"hook.backup.velero.io/command": "legacy", "hook.backup.velero.io/timeout": "0s"},
			pre: &ExecHook{Phase: PhasePreBackup, Container: "first", Command: []string{"legacy"},
				OnError: OnErrorFail, Timeout: 30 * time.Second, Source: VeleroLegacyBackup},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pre, post, err := BackupHooks(annotated(tc.ann))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pre, tc.pre) {
				t.Errorf("pre = %+v, want %+v", pre, tc.pre)
			}
			if !reflect.DeepEqual(post, tc.post) {
				t.Errorf("post = %+v, want %+v", post, tc.post)
			}
		})
	}
}

func TestBackupHooksErrors(t *testing.T) {
	for _, tc := range []struct {
		ann  map[string]string
		want string
	}{
		{map[string]string{"pre.hook.backup.velero.io/command": "x", "pre.hook.backup.velero.io/on-error": "fail"},
			`pod ns/p: annotation pre.hook.backup.velero.io/on-error: "fail" is neither Fail nor Continue`},
		{map[string]string{"post.hook.backup.ferry.dev/command": "x", "post.hook.backup.ferry.dev/timeout": "30"},
			`pod ns/p: annotation post.hook.backup.ferry.dev/timeout: "30" is not a duration`},
		{map[string]string{"pre.hook.backup.velero.io/command": "x", "pre.hook.backup.velero.io/timeout": "-1s"},
			"annotation pre.hook.backup.velero.io/timeout: negative duration"},
		{map[string]string{"pre.hook.backup.velero.io/command": `["sh", 1]`},
			"annotation pre.hook.backup.velero.io/command: starts with '[' but is not a JSON array of strings"},
		{map[string]string{"pre.hook.backup.velero.io/command": `[]`},
			"annotation pre.hook.backup.velero.io/command: empty command []"},
	} {
		pre, post, err := BackupHooks(annotated(tc.ann))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.ann, err, tc.want)
		}
		if pre != nil || post != nil {
			t.Errorf("%v: hooks %v %v with an error", tc.ann, pre, post)
		}
	}
	if _, _, err := BackupHooks(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "empty",
		Annotations: map[string]string{"pre.hook.backup.velero.io/command": "x"}}}); err == nil || !strings.Contains(err.Error(), "no containers") {
		t.Errorf("a pod without containers: %v", err)
	}
	if _, _, err := BackupHooks(nil); err == nil {
		t.Error("nil pod: no error")
	}
}

func TestRestoreHookParse(t *testing.T) {
	h, err := RestoreHook(annotated(map[string]string{"post.hook.restore.velero.io/command": "restore-it"}))
	if err != nil {
		t.Fatal(err)
	}
	want := &ExecHook{Phase: PhasePostRestore, Container: "first", Command: []string{"restore-it"},
		OnError: OnErrorContinue, Timeout: 30 * time.Second, Source: VeleroPostRestore}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("defaults: %+v, want %+v", h, want)
	}
	h, err = RestoreHook(annotated(map[string]string{
		"post.hook.restore.velero.io/command":        "ignored",
		"post.hook.restore.ferry.dev/command":        `["psql", "-f", "/backup/x.sql"]`,
		"post.hook.restore.ferry.dev/container":      "second",
		"post.hook.restore.ferry.dev/on-error":       "Fail",
		"post.hook.restore.ferry.dev/exec-timeout":   "45s",
		"post.hook.restore.ferry.dev/timeout":        "1h", // a backup key: not read
		"post.hook.restore.ferry.dev/wait-timeout":   "5m",
		"post.hook.restore.ferry.dev/wait-for-ready": "true",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want = &ExecHook{Phase: PhasePostRestore, Container: "second", Command: []string{"psql", "-f", "/backup/x.sql"},
		OnError: OnErrorFail, Timeout: 45 * time.Second, Source: FerryPostRestore, WaitTimeout: 5 * time.Minute, WaitForReady: true}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("all set: %+v, want %+v", h, want)
	}
	if h, err := RestoreHook(annotated(nil)); h != nil || err != nil {
		t.Errorf("no annotations: %v, %v", h, err)
	}
	for key, v := range map[string]string{"wait-for-ready": "yes", "wait-timeout": "soon", "exec-timeout": "1 minute", "on-error": "Ignore"} {
		_, err := RestoreHook(annotated(map[string]string{"post.hook.restore.velero.io/command": "x", "post.hook.restore.velero.io/" + key: v}))
		if err == nil || !strings.Contains(err.Error(), "annotation post.hook.restore.velero.io/"+key+`: "`+v+`"`) {
			t.Errorf("%s=%s: error %v, want one naming the annotation and value", key, v, err)
		}
	}
}

func TestInitContainer(t *testing.T) {
	c, err := InitContainer(annotated(map[string]string{
		"init.hook.restore.velero.io/container-image": "busybox",
		"init.hook.restore.velero.io/container-name":  "prep",
		"init.hook.restore.velero.io/command":         `["/bin/sh", "-c", "echo prep"]`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Container{Name: "prep", Image: "busybox", Command: []string{"/bin/sh", "-c", "echo prep"}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v, want %+v", c, want)
	}
	c, err = InitContainer(annotated(map[string]string{
		"init.hook.restore.velero.io/container-image": "velero-image",
		"init.hook.restore.velero.io/container-name":  "velero-name",
		"init.hook.restore.ferry.dev/container-image": "ferry-image",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want = &corev1.Container{Name: DefaultInitContainerName, Image: "ferry-image"}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("ferry's prefix, defaults: got %+v, want %+v", c, want)
	}
	if c, err := InitContainer(annotated(nil)); c != nil || err != nil {
		t.Errorf("no annotations: %v, %v", c, err)
	}
	_, err = InitContainer(annotated(map[string]string{"init.hook.restore.velero.io/command": "x"}))
	if err == nil || !strings.Contains(err.Error(), "init.hook.restore.velero.io/command is set but init.hook.restore.velero.io/container-image is not") {
		t.Errorf("command without image: %v", err)
	}
}

func podObject(t *testing.T, ann map[string]string, inits ...string) *unstructured.Unstructured {
	t.Helper()
	p := annotated(ann)
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: n, Image: "img"})
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func initNames(t *testing.T, u *unstructured.Unstructured) []string {
	t.Helper()
	var p corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range p.Spec.InitContainers {
		names = append(names, c.Name)
	}
	return names
}

func TestInjectInitContainer(t *testing.T) {
	ann := map[string]string{
		"init.hook.restore.velero.io/container-image": "busybox",
		"init.hook.restore.velero.io/container-name":  "prep",
		"init.hook.restore.velero.io/command":         "/prep",
	}
	for _, tc := range []struct {
		inits, want []string
	}{
		{nil, []string{"prep"}},
		{[]string{"app-init"}, []string{"prep", "app-init"}},
		{[]string{v1alpha1.RestoreWaitContainer, "app-init"}, []string{v1alpha1.RestoreWaitContainer, "prep", "app-init"}},
		{[]string{"app-init", "prep"}, []string{"app-init", "prep"}}, // there already
	} {
		u := podObject(t, ann, tc.inits...)
		changed, err := InjectInitContainer(u)
		if err != nil {
			t.Fatal(err)
		}
		if got := initNames(t, u); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: init containers %v, want %v", tc.inits, got, tc.want)
		}
		if wantChanged := len(tc.want) > len(tc.inits); changed != wantChanged {
			t.Errorf("%v: changed = %t, want %t", tc.inits, changed, wantChanged)
		}
		again, err := InjectInitContainer(u)
		if err != nil || again {
			t.Errorf("%v: a second injection changed=%t, %v; want nothing", tc.inits, again, err)
		}
		if got := initNames(t, u); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: after a second injection %v, want %v", tc.inits, got, tc.want)
		}
	}
	u := podObject(t, ann)
	if _, err := InjectInitContainer(u); err != nil {
		t.Fatal(err)
	}
	var p corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		t.Fatal(err)
	}
	if c := p.Spec.InitContainers[0]; c.Image != "busybox" || !reflect.DeepEqual(c.Command, []string{"/prep"}) {
		t.Errorf("injected %+v", c)
	}
	if changed, err := InjectInitContainer(podObject(t, nil, "x")); changed || err != nil {
		t.Errorf("no hook: changed=%t, %v", changed, err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"annotations": ann}}}
	if changed, err := InjectInitContainer(cm); changed || err != nil {
		t.Errorf("a ConfigMap: changed=%t, %v", changed, err)
	}
	bad := podObject(t, map[string]string{"init.hook.restore.velero.io/container-name": "x"})
	if _, err := InjectInitContainer(bad); err == nil || !strings.Contains(err.Error(), "pod ns/p: annotation init.hook.restore.velero.io/container-name") {
		t.Errorf("a name without an image: %v", err)
	}
}

// TestRunRefuses checks what Run refuses without calling the API server.
func TestRunRefuses(t *testing.T) {
	ctx := context.Background()
	pod := annotated(nil)
	pod.Status.Phase = corev1.PodRunning
	h := &ExecHook{Phase: PhasePreBackup, Container: "nope", Command: []string{"true"}}
	r := Run(ctx, nil, pod, h)
	if r.Err == nil || r.Err.Error() != `pre-backup hook in pod ns/p container nope, command ["true"]: the pod has no container nope` {
		t.Errorf("a container not in the pod: %v", r.Err)
	}
	pod.Status.Phase = corev1.PodPending
	h.Container = ""
	r = Run(ctx, nil, pod, h)
	if r.Err == nil || r.Err.Error() != `pre-backup hook in pod ns/p container first, command ["true"]: the pod is Pending, not Running` {
		t.Errorf("a pending pod: %v", r.Err)
	}
	if r := Run(ctx, nil, nil, h); r.Err == nil {
		t.Error("nil pod: no error")
	}
	if r := Run(ctx, nil, pod, nil); r.Err == nil {
		t.Error("nil hook: no error")
	}
	if r := Run(ctx, nil, pod, &ExecHook{Phase: PhasePostBackup}); r.Err == nil || !strings.Contains(r.Err.Error(), "no command") {
		t.Errorf("no command: %v", r.Err)
	}
}

func TestCapped(t *testing.T) {
	var c capped
	c.Write([]byte(strings.Repeat("a", MaxOutput-1)))
	c.Write([]byte("bcd"))
	if s := c.String(); !strings.HasPrefix(s, strings.Repeat("a", MaxOutput-1)+"b\n") || !strings.HasSuffix(s, "[ferry: 2 more bytes not kept]") {
		t.Errorf("capped output ends %q", s[len(s)-40:])
	}
	var e error = &hookError{where: "w", what: "x", err: context.DeadlineExceeded}
	if !errors.Is(e, context.DeadlineExceeded) {
		t.Error("hookError does not unwrap")
	}
}
