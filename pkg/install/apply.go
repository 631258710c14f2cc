package install

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
)

// FieldManager is the server-side-apply field manager of `ferry install`.
const FieldManager = "ferry-install"

// Scheme knows every kind Render returns.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

// Apply server-side-applies objs (from Render, with TypeMeta set) in
// order, waiting for the CRDs to be Established (60 s each) before the
// objects that need them. It logs one line per object to w. Errors name
// the object.
func Apply(ctx context.Context, cluster *kube.Cluster, objs []client.Object, w io.Writer) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cluster.Discovery))
	crdsReady := false
	for _, o := range objs {
		u, err := ToUnstructured(o)
		if err != nil {
			return err
		}
		isCRD := u.GetKind() == "CustomResourceDefinition"
		if !isCRD && !crdsReady {
			mapper.Reset()
			crdsReady = true
		}
		ri, err := resourceFor(cluster.Dynamic, mapper, u)
		if err != nil {
			return err
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), describe(u), err)
		}
		fmt.Fprintf(w, "%s %s applied\n", u.GetKind(), describe(u))
		if isCRD {
			if err := waitEstablished(ctx, ri, u.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete deletes objs in reverse order; missing ones are skipped. The
// Namespace's deletion removes what is in it; the CRDs' removes every
// ferry.dev object (the store keeps the backups).
func Delete(ctx context.Context, cluster *kube.Cluster, objs []client.Object, w io.Writer) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cluster.Discovery))
	for i := len(objs) - 1; i >= 0; i-- {
		u, err := ToUnstructured(objs[i])
		if err != nil {
			return err
		}
		ri, err := resourceFor(cluster.Dynamic, mapper, u)
		if meta.IsNoMatchError(err) {
			continue // its CRD is gone already
		}
		if err != nil {
			return err
		}
		err = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(w, "%s %s not found\n", u.GetKind(), describe(u))
		case err != nil:
			return fmt.Errorf("deleting %s %s: %w", u.GetKind(), describe(u), err)
		default:
			fmt.Fprintf(w, "%s %s deleted\n", u.GetKind(), describe(u))
		}
	}
	return nil
}

// ToUnstructured converts a rendered object for printing or applying,
// without the empty status and creationTimestamp of the typed object.
func ToUnstructured(o client.Object) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

func resourceFor(dyn dynamic.Interface, mapper meta.RESTMapper, u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), describe(u), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return dyn.Resource(m.Resource), nil
}

func describe(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetName()
}

func waitEstablished(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		u, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CustomResourceDefinition %s not Established: %w", name, err)
	}
	return nil
}
