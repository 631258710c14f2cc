package hooks

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// InitContainer returns the init container a pod's init-container hook
// annotations ask a restore to add, nil when they ask for none. ferry's
// init.hook.restore.ferry.dev/ wins over Velero's prefix when both set a
// container-image. A container-name or command without a container-image
// is an error (Velero ignores them).
func InitContainer(pod *corev1.Pod) (*corev1.Container, error) {
	if pod == nil {
		return nil, fmt.Errorf("hooks: no pod")
	}
	ann := pod.Annotations
	p := ""
	for _, c := range []string{FerryInitRestore, VeleroInitRestore} {
		if strings.TrimSpace(ann[c+KeyContainerImage]) != "" {
			p = c
			break
		}
	}
	if p == "" {
		for _, c := range []string{FerryInitRestore, VeleroInitRestore} {
			for _, k := range []string{KeyContainerName, KeyCommand} {
				if strings.TrimSpace(ann[c+k]) != "" {
					return nil, podErr(pod, fmt.Errorf("annotation %s is set but %s is not", c+k, c+KeyContainerImage))
				}
			}
		}
		return nil, nil
	}
	c := &corev1.Container{
		Name:  strings.TrimSpace(ann[p+KeyContainerName]),
		Image: strings.TrimSpace(ann[p+KeyContainerImage]),
	}
	if c.Name == "" {
		c.Name = DefaultInitContainerName
	}
	if v := ann[p+KeyCommand]; strings.TrimSpace(v) != "" {
		cmd, err := parseCommand(p+KeyCommand, v)
		if err != nil {
			return nil, podErr(pod, err)
		}
		c.Command = cmd
	}
	return c, nil
}

// InjectInitContainer adds the init container of a pod's init-container
// hook (InitContainer) to the pod object u, first of its init containers
// or, when the first is ferry-restore-wait, right after that one, so that
// the hook sees the pod's restored volume data. It changes nothing when u
// is not a Pod, has no such hook, or already has an init container of
// that name (a pod restored before).
func InjectInitContainer(u *unstructured.Unstructured) (changed bool, err error) {
	if u == nil || u.GetKind() != "Pod" {
		return false, nil
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: u.GetNamespace(), Name: u.GetName(), Annotations: u.GetAnnotations(),
	}}
	c, err := InitContainer(pod)
	if err != nil || c == nil {
		return false, err
	}
	inits, _, err := unstructured.NestedSlice(u.Object, "spec", "initContainers")
	if err != nil {
		return false, podErr(pod, fmt.Errorf("spec.initContainers: %w", err))
	}
	at := 0
	for i, ic := range inits {
		m, _ := ic.(map[string]any)
		if m["name"] == c.Name {
			return false, nil
		}
		if i == 0 && m["name"] == v1alpha1.RestoreWaitContainer {
			at = 1
		}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return false, podErr(pod, err)
	}
	delete(obj, "resources") // {}: the converter keeps empty structs
	out := make([]any, 0, len(inits)+1)
	out = append(out, inits[:at]...)
	out = append(out, obj)
	out = append(out, inits[at:]...)
	if err := unstructured.SetNestedSlice(u.Object, out, "spec", "initContainers"); err != nil {
		return false, podErr(pod, err)
	}
	return true, nil
}
