package controller

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/kube"
)

// ClusterReconciler checks that each member cluster answers, through its
// ClusterCredential, when the Cluster or its credential changes and every
// CheckPeriod, and records it in status: the Reachable condition (reason
// Reachable, or why not: Unreachable, ClusterCredentialNotFound,
// InvalidClusterCredential), serverVersion and lastChecked.
type ClusterReconciler struct {
	Client client.Client
	Reader client.Reader
	Options
}

// Reconcile checks one Cluster.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var c v1beta1.Cluster
	if err := r.Reader.Get(ctx, req.NamespacedName, &c); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	cond := metav1.Condition{Type: v1beta1.ClusterConditionReachable, Status: metav1.ConditionTrue, Reason: "Reachable", ObservedGeneration: c.Generation}
	version := ""
	cl, err := connectCluster(ctx, r.Reader, &c, &r.Options)
	var f *failure
	switch {
	case errors.As(err, &f):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, f.reason, f.err.Error()
	case err != nil:
		return reconcile.Result{}, err
	default:
		version = cl.Version.GitVersion
		cond.Message = "the API server at " + cl.Config.Host + " answered"
	}
	now := r.now()
	c.Status.ServerVersion, c.Status.LastChecked, c.Status.ObservedGeneration = version, &now, c.Generation
	meta.SetStatusCondition(&c.Status.Conditions, cond)
	if err := r.Client.Status().Update(ctx, &c); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{RequeueAfter: r.CheckPeriod}, nil
}

// clustersOf maps a ClusterCredential to the Clusters that name it.
func (r *ClusterReconciler) clustersOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1beta1.ClusterList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, c := range list.Items {
		if c.Spec.CredentialRef.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
		}
	}
	return out
}

// connectRef reaches the Cluster name of namespace through its
// ClusterCredential's kubeconfig (connectCluster). Errors name the field
// (path), and an unreachable cluster has reason unreachable.
func connectRef(ctx context.Context, reader client.Reader, o *Options, namespace, name, path, unreachable string) (*kube.Cluster, *v1beta1.Cluster, error) {
	var c v1beta1.Cluster
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fail("ClusterNotFound", "%s: Cluster %q not found in namespace %s", path, name, namespace)
		}
		return nil, nil, err
	}
	cl, err := connectCluster(ctx, reader, &c, o)
	var f *failure
	switch {
	case errors.As(err, &f) && f.reason == reasonUnreachable:
		return nil, nil, fail(unreachable, "%s: %w", path, f.err)
	case errors.As(err, &f):
		return nil, nil, fail(f.reason, "%s: %w", path, f.err)
	}
	return cl, &c, err
}
