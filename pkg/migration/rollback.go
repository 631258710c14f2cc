package migration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kwait "k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/kube"
)

// RollbackOptions say what a rollback does with the target.
type RollbackOptions struct {
	// DeleteTarget deletes the target's copies of the quiesced workloads
	// instead of scaling them to zero.
	DeleteTarget bool
}

// Rollback puts the source of staged migration o.Name back as the
// journal recorded it before the cutover (replica counts, CronJob
// suspensions) and scales the target's copies of those workloads to zero
// (or deletes them). It works on a cutover at any step, also one killed
// or failed halfway, and it may run again. Once done, the journal has no
// cutover, and stages may run again.
func Rollback(ctx context.Context, o Options, ro RollbackOptions) (*Journal, error) {
	o.complete()
	j, err := LoadJournal(ctx, o.Location, o.Name)
	if err != nil {
		return nil, err
	}
	if err := j.finished(); err != nil {
		return j, err
	}
	if err := j.sameClusters(ctx, o.Source, o.Target); err != nil {
		return j, err
	}
	c := j.Cutover
	if c == nil {
		return j, fmt.Errorf("migration %s: no cutover began, so the source was not changed and there is nothing to roll back", o.Name)
	}
	c.Step = CutoverRolling
	if err := j.save(ctx, o.Location); err != nil {
		return j, err
	}
	// Source and target never both run the workloads: a target whose
	// copies cannot be stopped keeps the source quiesced. Only a target
	// the caller chose to go without (nil) lets the source run anyway.
	var targetErr error
	if o.Target == nil {
		targetErr = errors.New("the target was not reached, so its copies of the workloads may still run")
	} else if err := stopTargetCopies(ctx, o, j, ro); err != nil {
		return j, fmt.Errorf("migration %s: rollback: %w; the source stays quiesced so that source and target never both run: run the rollback again once the target's copies can be stopped (or without the target, which puts the source back anyway)", o.Name, err)
	}
	for _, w := range c.Workloads {
		if err := scale(ctx, o.Source.Typed, w, 0, false); err != nil {
			return j, fmt.Errorf("migration %s: rollback: source %s %s/%s back to its recorded count: %w", o.Name, w.Kind, w.Namespace, w.Name, err)
		}
	}
	// A cutover that was killed may have left helper pods that still
	// read the source's claims or write the target's.
	for _, c := range []*kube.Cluster{o.Target, o.Source} {
		if c == nil {
			continue
		}
		if err := sweepHelpers(ctx, c); err != nil {
			return j, fmt.Errorf("migration %s: rollback: %s: %w", o.Name, c.Name, err)
		}
	}
	if targetErr != nil {
		return j, fmt.Errorf("migration %s: rollback: the source runs at its recorded counts again, but %w; run the rollback again once the target is reachable to stop them", o.Name, targetErr)
	}
	now := time.Now()
	j.Cutover, j.RolledBack = nil, &now
	return j, j.save(ctx, o.Location)
}

// sweepHelpers removes the helper pods that killed runs left in cluster
// c: those whose run's Lease expired (helperpod.Sweep), waiting for the
// Leases of a run killed moments ago to expire, for at most one
// helperpod.LeaseDuration and a little more.
func sweepHelpers(ctx context.Context, c *kube.Cluster) error {
	deadline := time.Now().Add(helperpod.LeaseDuration + 5*time.Second)
	for {
		if _, err := helperpod.Sweep(ctx, c.Typed); err != nil {
			return err
		}
		left, err := helperpod.Pending(ctx, c.Typed)
		if err != nil {
			return err
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// stopTargetCopies scales the target's copies of the quiesced workloads
// to zero (or deletes them) and waits until their pods are gone, so that
// source and target never both run them. Only the copies a cutover
// restored are stopped: a workload of the same name that the target had
// of its own keeps running.
func stopTargetCopies(ctx context.Context, o Options, j *Journal, ro RollbackOptions) error {
	type podsOf struct {
		namespace string
		sel       labels.Selector
	}
	var wait []podsOf
	for _, w := range j.Cutover.Workloads {
		t := w
		t.Namespace = mapNamespace(j.Restore, w.Namespace)
		ours, sel, err := j.cutoverCopy(ctx, o.Target.Typed, t)
		if err != nil {
			return err
		}
		if !ours {
			continue
		}
		if sel != nil {
			wait = append(wait, podsOf{t.Namespace, sel})
		}
		if ro.DeleteTarget {
			err = deleteWorkload(ctx, o, t)
		} else {
			err = scale(ctx, o.Target.Typed, t, 0, true)
		}
		if err != nil {
			return fmt.Errorf("the target's %s %s/%s could not be stopped: %w", t.Kind, t.Namespace, t.Name, err)
		}
	}
	var left []string
	err := kwait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for _, w := range wait {
			pods, err := o.Target.Typed.CoreV1().Pods(w.namespace).List(ctx, metav1.ListOptions{LabelSelector: w.sel.String()})
			if err != nil {
				return false, nil // retried until the deadline
			}
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					left = append(left, w.namespace+"/"+p.Name)
				}
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("in the target, the stopped copies' pods were not gone within 5m: %v (still there: %s)", err, strings.Join(left, ", "))
	}
	return nil
}

func mapNamespace(spec v1alpha1.RestoreSpec, ns string) string {
	if t := spec.NamespaceMapping[ns]; t != "" {
		return t
	}
	return ns
}

// deleteWorkload deletes the target's copy of w (its pods go with it).
func deleteWorkload(ctx context.Context, o Options, w v1alpha1.QuiescedWorkload) error {
	c := o.Target.Typed
	var err error
	switch w.Kind {
	case "Deployment":
		err = c.AppsV1().Deployments(w.Namespace).Delete(ctx, w.Name, deleteForeground)
	case "StatefulSet":
		err = c.AppsV1().StatefulSets(w.Namespace).Delete(ctx, w.Name, deleteForeground)
	case "ReplicaSet":
		err = c.AppsV1().ReplicaSets(w.Namespace).Delete(ctx, w.Name, deleteForeground)
	case "CronJob":
		err = c.BatchV1().CronJobs(w.Namespace).Delete(ctx, w.Name, deleteForeground)
	}
	if err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

var deleteForeground = func() metav1.DeleteOptions {
	p := metav1.DeletePropagationForeground
	return metav1.DeleteOptions{PropagationPolicy: &p}
}()
