package preflight

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/report"
)

// Bounds of the pull probe: pods at once, and how long one image may take
// to be pulled (a large image on a slow link takes minutes).
const (
	pullProbeWorkers = 4
	pullProbeTimeout = 5 * time.Minute
)

// pullProbeCommand is what a pull probe's container is told to run: a
// path no image has, so that the container fails to start once its
// image is pulled, and no code of the image runs.
const pullProbeCommand = "/.ferry-preflight-pull-probe"

// Reasons a kubelet gives a container whose image it could not pull.
var pullFailures = map[string]bool{"ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true, "RegistryUnavailable": true}

// checkPulls has the target's nodes pull every image the move's workloads
// name (Options.PullProbe): a pod per image use in the target, in the
// workloads' namespace when the target has it (else default), with their
// pull Secrets (the target's of that name there, else a probe copy of the
// move's), whose container runs pullProbeCommand. An image the kubelet
// could not pull is a blocker with its message; one it pulled is not
// said; one the registry has not is a blocker already, and not tried.
// The pods and Secret copies are deleted as each ends.
func checkPulls(ctx context.Context, e *env) {
	if !e.o.PullProbe {
		return
	}
	if e.o.Backup.Spec.Images == images.ModeCopy || e.o.Backup.Spec.Images == images.ModeBundle {
		e.skip("the pull probe: the move puts the images in their registries first, where they are not yet")
		return
	}
	var uses []*imageUse
	for _, u := range e.uses {
		if !u.missing {
			uses = append(uses, u)
		}
	}
	// The probes' pods and Secret copies belong to a helper run: deleted
	// as each probe ends, and by a later run's sweep if this one is killed.
	run := helperpod.NewRun(e.t.cluster.Typed, e.o.Log)
	defer run.Close(ctx)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, pullProbeWorkers)
	for _, u := range uses {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ns := metav1.NamespaceDefault
			if _, ok := e.t.namespaces[u.namespace]; ok {
				ns = u.namespace
			}
			node, msg, err := e.pullProbe(ctx, run, u, ns)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				e.skip("the pull probe of image %s in namespace %s: %v", u.ref, ns, err)
			case msg != "":
				e.add(report.Blocker, "image", u.users, fmt.Sprintf("image %s: target node %s could not pull it with the pull Secrets the pods name (%s): %s", u.ref, node, secretList(u.secrets), msg),
					"give the target's nodes or the pods a pull Secret with access to the registry, or map the image to a registry they reach (spec.imageRegistryMappings)")
			}
		}()
	}
	wg.Wait()
}

// pullProbe runs u's pull probe pod in namespace ns and returns the node
// it ran on and, when the kubelet could not pull the image, its message.
// An error means the probe did not say (not scheduled in time, refused).
func (e *env) pullProbe(ctx context.Context, run *helperpod.Run, u *imageUse, ns string) (node, failure string, err error) {
	c := e.t.cluster.Typed.CoreV1()
	ctx, cancel := context.WithTimeout(ctx, pullProbeTimeout)
	defer cancel()
	labels, err := run.Own(ctx, ns)
	if err != nil {
		return "", "", err
	}
	labels[helperpod.LabelPurpose] = "preflight-pull"
	remove := func(resource, name string) {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer dcancel()
		zero := int64(0)
		var err error
		if resource == "pods" {
			err = c.Pods(ns).Delete(dctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		} else {
			err = c.Secrets(ns).Delete(dctx, name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			e.o.Log.Warn("a pull probe's object was not deleted (a later run sweeps it)", "namespace", ns, "resource", resource, "name", name, "error", err)
		}
	}
	var pullSecrets []corev1.LocalObjectReference
	for key := range u.secrets {
		_, name, _ := strings.Cut(key, "/")
		// The target's Secret of that name, in the workloads' own
		// namespace only: another namespace's is another Secret.
		if _, err := c.Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && ns == u.namespace {
			pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: name})
			continue
		}
		planned, ok := e.c.pullSecrets[key]
		if !ok {
			continue // neither cluster has it: the pods go without it too
		}
		var s corev1.Secret
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(planned.Object, &s); err != nil {
			continue
		}
		probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "ferry-pull-probe-", Labels: labels}, Type: s.Type, Data: s.Data}
		created, err := c.Secrets(ns).Create(ctx, probe, metav1.CreateOptions{})
		if err != nil {
			return "", "", fmt.Errorf("copying pull Secret %s: %w", key, err)
		}
		defer remove("secrets", created.Name)
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: created.Name})
	}
	pod, err := c.Pods(ns).Create(ctx, pullProbePod(u.ref, labels, pullSecrets), metav1.CreateOptions{})
	if err != nil {
		return "", "", fmt.Errorf("creating the probe pod: %w", err)
	}
	defer remove("pods", pod.Name)
	// A first ErrImagePull may be transient: the kubelet tries again, and
	// says ImagePullBackOff when that failed too. The last failure seen
	// is the answer when the time runs out.
	var seen string
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = p.Spec.NodeName
		for _, cs := range p.Status.ContainerStatuses {
			switch w := cs.State.Waiting; {
			case w != nil && w.Reason == "ErrImagePull":
				seen = w.Reason + ": " + w.Message
			case w != nil && pullFailures[w.Reason]:
				failure = w.Reason + ": " + w.Message
				if w.Reason == "ImagePullBackOff" && seen != "" {
					failure = seen // the kubelet's own reason, not the back-off's
				}
				return true, nil
			case cs.ImageID != "" || cs.State.Running != nil || cs.State.Terminated != nil:
				return true, nil // pulled (its container then fails to start, as meant)
			case w != nil && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing":
				return true, nil // CreateContainerError and the like: the image is there
			}
		}
		return false, nil
	})
	if err != nil && seen != "" {
		return node, seen, nil
	}
	if err != nil {
		where := "no node started it"
		if node != "" {
			where = "node " + node + " was still pulling it"
		}
		return node, "", fmt.Errorf("no answer within %s (%s)", pullProbeTimeout, where)
	}
	return node, failure, nil
}

// pullProbePod is the probe pod of image ref: one container of the image
// that is told to run pullProbeCommand, under PodSecurity's restricted
// level, with a small request, never restarted.
func pullProbePod(ref string, labels map[string]string, secrets []corev1.LocalObjectReference) *corev1.Pod {
	no, yes, nobody := false, true, int64(65534)
	deadline := int64(2 * pullProbeTimeout / time.Second) // the kubelet ends it even if ferry is gone
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "ferry-pull-probe-", Labels: labels},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, ImagePullSecrets: secrets, AutomountServiceAccountToken: &no,
			ActiveDeadlineSeconds: &deadline,
			EnableServiceLinks:    &no, TerminationGracePeriodSeconds: new(int64),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &nobody, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "pull", Image: ref, ImagePullPolicy: corev1.PullAlways, Command: []string{pullProbeCommand},
				Resources:       corev1.ResourceRequirements{Requests: small, Limits: small},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}}}}
}
