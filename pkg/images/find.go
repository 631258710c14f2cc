// Package images finds the container images a cluster runs, copies them
// between registries or into the backup storage location, and rewrites
// image references on restore. Registry and OCI-layout work is done with
// go-containerregistry (name, v1, remote, mutate); this package adds the
// Kubernetes side (pod templates), the store side (a content-addressed
// image layout under images/) and per-image results.
package images

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/kubeferry/ferry/pkg/kube"
)

// ContainerFields are the pod-spec fields that hold containers, in the
// order they are searched.
var ContainerFields = []string{"initContainers", "containers", "ephemeralContainers"}

// Use is one place an image is named: a container of a workload object.
type Use struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Field is containers, initContainers or ephemeralContainers.
	Field     string `json:"field"`
	Container string `json:"container"`
}

// String gives "Deployment shop/web containers[app]".
func (u Use) String() string {
	obj := u.Name
	if u.Namespace != "" {
		obj = u.Namespace + "/" + u.Name
	}
	return fmt.Sprintf("%s %s %s[%s]", u.Kind, obj, u.Field, u.Container)
}

// Found is one image reference as written in a pod spec, and where.
type Found struct {
	Reference string
	Use       Use
}

// Parse parses the reference. The error names the image and where it is
// used, so a malformed reference in a workload can be found.
func (f Found) Parse() (name.Reference, error) {
	ref, err := name.ParseReference(f.Reference)
	if err != nil {
		return nil, fmt.Errorf("image %q in %s: malformed reference: %w", f.Reference, f.Use, err)
	}
	return ref, nil
}

// Find returns the image of every container, init container and ephemeral
// container in obj's pod spec (obj is a decoded Kubernetes object with
// apiVersion and kind). Objects of kinds without a pod template give nil.
// Containers without an image (possible in a Pod only before admission)
// are left out.
func Find(obj map[string]any) []Found {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group := ""
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		group = g
	}
	path, ok := kube.PodSpecPathOf(group, kind)
	if !ok {
		return nil
	}
	spec := nested(obj, path)
	if spec == nil {
		return nil
	}
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	objName, _ := meta["name"].(string)
	var out []Found
	for _, field := range ContainerFields {
		list, _ := spec[field].([]any)
		for _, c := range list {
			cm, _ := c.(map[string]any)
			img, _ := cm["image"].(string)
			if img == "" {
				continue
			}
			cname, _ := cm["name"].(string)
			out = append(out, Found{Reference: img, Use: Use{Kind: kind, Namespace: ns, Name: objName, Field: field, Container: cname}})
		}
	}
	return out
}

// nested walks maps along path; nil if any step is missing.
func nested(obj map[string]any, path []string) map[string]any {
	cur := obj
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

// RewriteObject rewrites the image of every container in obj's pod spec
// with rw, in place. It returns a note per changed image
// ("containers[app] image old/ns/app:1 -> new/ns/app:1@sha256:..."), and
// one error per image that could not be rewritten (a malformed reference),
// which is left as it was; the other images are still rewritten.
func RewriteObject(rw *Rewriter, obj map[string]any) (notes []string, errs []error) {
	if rw.Empty() {
		return nil, nil
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group := ""
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		group = g
	}
	path, ok := kube.PodSpecPathOf(group, kind)
	if !ok {
		return nil, nil
	}
	spec := nested(obj, path)
	if spec == nil {
		return nil, nil
	}
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	objName, _ := meta["name"].(string)
	for _, field := range ContainerFields {
		list, _ := spec[field].([]any)
		for _, c := range list {
			cm, _ := c.(map[string]any)
			img, _ := cm["image"].(string)
			if img == "" {
				continue
			}
			cname, _ := cm["name"].(string)
			out, changed, err := rw.Rewrite(img)
			if err != nil {
				u := Use{Kind: kind, Namespace: ns, Name: objName, Field: field, Container: cname}
				errs = append(errs, fmt.Errorf("%s: %w", u, err))
				continue
			}
			if changed {
				cm["image"] = out
				notes = append(notes, fmt.Sprintf("%s[%s] image %s -> %s", field, cname, img, out))
			}
		}
	}
	return notes, errs
}
