package nodeagent

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/kube"
)

// Node agent heartbeat: each agent keeps a Lease (coordination.k8s.io)
// named LeaseName(node) in its namespace, renewed every
// LeaseRenewPeriod, so that the server can tell at once that a node has no
// agent (no Lease, or one not renewed within its duration), the way the
// kubelet's node Lease tells the control plane a node is alive.
const (
	LeaseRenewPeriod  = 10 * time.Second
	LeaseDurationSecs = 40
	leaseBase         = "ferry-node-agent-"
)

// LeaseName is the Lease of node's agent: ferry-node-agent-<node>,
// the node cut and hashed so that the name stays within 253 characters.
func LeaseName(node string) string {
	if len(leaseBase)+len(node) <= 253 {
		return leaseBase + node
	}
	return kube.ObjectName(leaseBase+node[:200], node)
}

// heartbeat renews the agent's Lease until the manager stops.
type heartbeat struct{ a *Reconciler }

// NeedLeaderElection implements manager.LeaderElectionRunnable: every agent
// runs it.
func (heartbeat) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (h heartbeat) Start(ctx context.Context) error {
	_ = wait.PollUntilContextCancel(ctx, LeaseRenewPeriod, true, func(ctx context.Context) (bool, error) {
		if err := h.a.renewLease(ctx); err != nil && ctx.Err() == nil {
			h.a.Log.Warn("renewing the node agent's Lease", "err", err)
		}
		return false, nil
	})
	return nil
}

func (a *Reconciler) renewLease(ctx context.Context) error {
	now := metav1.NewMicroTime(time.Now())
	dur := int32(LeaseDurationSecs)
	node := a.Opts.Node
	l := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: a.Opts.Namespace, Name: LeaseName(node)}
	err := a.APIReader.Get(ctx, key, l)
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "ferry", "app.kubernetes.io/component": "ferry-node-agent"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: &dur, AcquireTime: &now, RenewTime: &now}}
		if a.Opts.PodName != "" && a.Opts.PodUID != "" {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: a.Opts.PodName, UID: types.UID(a.Opts.PodUID)}}
		}
		return a.Client.Create(ctx, l)
	}
	if err != nil {
		return err
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &node, &dur, &now
	if a.Opts.PodName != "" && a.Opts.PodUID != "" {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: a.Opts.PodName, UID: types.UID(a.Opts.PodUID)}}
	}
	return a.Client.Update(ctx, l)
}

// Grace is how long the server watches a node agent's Lease before
// it calls the agent missing: an agent that is starting (a new node, a
// DaemonSet rollout, a slow image pull) has no Lease yet, or an old one.
const Grace = 2 * time.Minute

// Alive reports whether node's agent is alive: its Lease was renewed
// within the Lease's duration by the server's clock, or, since the node's
// clock may be off, its renewTime changes while the server watches it
// (every second, for up to grace: the node lifecycle controller's way of
// judging node Leases). The error says why not, for the volume's record.
func Alive(ctx context.Context, c client.Reader, ns, node string, grace time.Duration) error {
	name := LeaseName(node)
	deadline := time.Now().Add(grace)
	var first *metav1.MicroTime
	seen := false
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		l := &coordinationv1.Lease{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, l)
		switch {
		case err == nil:
			rt := l.Spec.RenewTime
			if rt != nil && l.Spec.LeaseDurationSeconds != nil && time.Since(rt.Time) <= time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
				return true, nil
			}
			if seen && rt != nil && (first == nil || !rt.Equal(first)) {
				return true, nil // renewed while watched: alive, its clock is off
			}
			if !seen {
				first, seen = rt, true
			}
		case !apierrors.IsNotFound(err):
			return false, fmt.Errorf("the node agent of node %s: reading its Lease %s/%s: %w", node, ns, name, err)
		}
		if time.Now().Before(deadline) {
			return false, nil
		}
		if !seen {
			return false, fmt.Errorf("no node agent runs on node %s (no Lease %s/%s appeared within %s): is the ferry-node-agent DaemonSet installed, and can it run there (taints, node selector)?", node, ns, name, grace)
		}
		last := "never"
		if first != nil {
			last = first.UTC().Format(time.RFC3339)
		}
		return false, fmt.Errorf("the node agent of node %s is not running: its Lease %s/%s was last renewed %s, and not within %s", node, ns, name, last, grace)
	})
}
