package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// crdEstablishTimeout bounds the wait for each CRD's Established condition.
const crdEstablishTimeout = 30 * time.Second

// manifest is one object read from a file, with where it came from.
type manifest struct {
	file string
	obj  *unstructured.Unstructured
}

// Apply is a small "kubectl create -f" for test input: it reads every
// multi-document YAML (or JSON) file, in order, and creates each object
// through the dynamic client, mapping kinds with discovery.
//
// Input handling: CRLF line endings, a leading "---", comment-only or empty
// documents (skipped), a missing final newline, and kind "List"-style
// documents (their items are created) are accepted.
//
// Order: all CustomResourceDefinitions first, each waited for until its
// Established condition is True (30 s each), then Namespaces, then the rest
// in file order. Namespaced objects without metadata.namespace go into
// namespace ("default" if namespace is ""), which is created first if
// missing. Nothing is updated: an existing object is an error.
//
// Returns the created objects as the server returned them, in creation order
// (for CRDs, as read back once Established). Errors name the file, kind,
// namespace/name; objects created before an error stay in the cluster.
func Apply(ctx context.Context, cfg *rest.Config, namespace string, files ...string) ([]*unstructured.Unstructured, error) {
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	var crds, nss, others []manifest
	for _, f := range files {
		objs, err := readManifests(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			switch {
			case gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
				crds = append(crds, manifest{f, o})
			case gvk.Group == "" && gvk.Kind == "Namespace":
				nss = append(nss, manifest{f, o})
			default:
				others = append(others, manifest{f, o})
			}
		}
	}
	a, err := newApplier(cfg, namespace)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, m := range crds {
		created, err := a.create(ctx, m)
		if err != nil {
			return out, err
		}
		created, err = a.waitEstablished(ctx, m, created)
		if err != nil {
			return out, err
		}
		out = append(out, created)
	}
	if len(crds) > 0 {
		a.mapper.Reset()
	}
	for _, list := range [][]manifest{nss, others} {
		for _, m := range list {
			created, err := a.create(ctx, m)
			if err != nil {
				return out, err
			}
			out = append(out, created)
		}
	}
	return out, nil
}

// readManifests decodes every object in file f.
func readManifests(f string) ([]*unstructured.Unstructured, error) {
	fh, err := os.Open(f)
	if err != nil {
		return nil, fmt.Errorf("testenv: apply: %w", err)
	}
	defer fh.Close()
	dec := yaml.NewYAMLOrJSONDecoder(fh, 4096)
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var m map[string]interface{}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("testenv: apply: %s: document %d: %w", f, doc, err)
		}
		if len(m) == 0 {
			continue // empty or comment-only document
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("testenv: apply: %s: document %d has no kind or apiVersion", f, doc)
		}
		if !u.IsList() {
			out = append(out, u)
			continue
		}
		err := u.EachListItem(func(o runtime.Object) error {
			item, ok := o.(*unstructured.Unstructured)
			if !ok || item.GetKind() == "" {
				return fmt.Errorf("list item without kind")
			}
			out = append(out, item)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("testenv: apply: %s: document %d (%s): %w", f, doc, u.GetKind(), err)
		}
	}
}

// applier holds the clients and state of one Apply call.
type applier struct {
	dyn       dynamic.Interface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	namespace string
	nsReady   bool
}

func newApplier(cfg *rest.Config, namespace string) (*applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("testenv: apply: discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("testenv: apply: dynamic client: %w", err)
	}
	return &applier{
		dyn:       dyn,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		namespace: namespace,
	}, nil
}

// describe names an object for error messages: "file: Kind ns/name".
func describe(m manifest) string {
	name := m.obj.GetName()
	if name == "" && m.obj.GetGenerateName() != "" {
		name = m.obj.GetGenerateName() + "*"
	}
	if ns := m.obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s: %s %s (%s)", m.file, m.obj.GetKind(), name, m.obj.GetAPIVersion())
}

// mapping finds the resource for m's kind, refreshing discovery once.
func (a *applier) mapping(m manifest) (*meta.RESTMapping, error) {
	gvk := m.obj.GroupVersionKind()
	mp, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && meta.IsNoMatchError(err) {
		a.mapper.Reset()
		mp, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return mp, err
}

// create creates one object (a copy of m.obj), defaulting its namespace.
func (a *applier) create(ctx context.Context, m manifest) (*unstructured.Unstructured, error) {
	mp, err := a.mapping(m)
	if err != nil {
		return nil, fmt.Errorf("testenv: apply: %s: %w", describe(m), err)
	}
	obj := m.obj.DeepCopy()
	var ri dynamic.ResourceInterface
	if mp.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(a.namespace)
			if err := a.ensureNamespace(ctx); err != nil {
				return nil, err
			}
		}
		ri = a.dyn.Resource(mp.Resource).Namespace(obj.GetNamespace())
	} else {
		obj.SetNamespace("")
		ri = a.dyn.Resource(mp.Resource)
	}
	created, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testenv: apply: %s: create: %w", describe(manifest{m.file, obj}), err)
	}
	return created, nil
}

// ensureNamespace creates a.namespace once if it does not exist.
func (a *applier) ensureNamespace(ctx context.Context) error {
	if a.nsReady {
		return nil
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(a.namespace)
	nsRes := a.dyn.Resource(nsGVR)
	if _, err := nsRes.Get(ctx, a.namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err = nsRes.Create(ctx, ns, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("testenv: apply: create namespace %s: %w", a.namespace, err)
		}
	} else if err != nil {
		return fmt.Errorf("testenv: apply: get namespace %s: %w", a.namespace, err)
	}
	a.nsReady = true
	return nil
}
