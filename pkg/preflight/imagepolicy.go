package preflight

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/report"
)

// imagePolicy is one rule of an admission policy that verifies image
// signatures: a Kyverno (Cluster)Policy rule's verifyImages, or a
// sigstore policy-controller ClusterImagePolicy.
type imagePolicy struct {
	// name is how the risk names it ("kyverno.io/ClusterPolicy check-signed
	// (rule verify)"), with where it is (moved, or the target's).
	name, where string
	// namespace limits a namespaced Kyverno Policy to its namespace.
	namespace string
	globs     []string
	// moved is set for a policy the move writes.
	moved bool
}

// policyKinds are the policies' kinds, by "group/Kind", with the
// resource the target serves them as.
var policyKinds = map[string]schema.GroupVersionResource{
	"kyverno.io/ClusterPolicy":               {Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"},
	"kyverno.io/Policy":                      {Group: "kyverno.io", Version: "v1", Resource: "policies"},
	"policy.sigstore.dev/ClusterImagePolicy": {Group: "policy.sigstore.dev", Version: "v1beta1", Resource: "clusterimagepolicies"},
}

// checkImagePolicies finds the policies that verify image signatures,
// those the move writes and the target's own, and the move's images
// they verify. A moved policy whose image patterns matched an image
// before the registry mappings and not after would let the target run
// it unverified (a warning). An image a policy verifies in the target
// needs its signatures at its new registry: a blocker when the move
// leaves the referrers behind (referrers none), a warning when it does
// not copy images (the signatures must be there already), else a note
// that they travel with it and verify by digest.
func checkImagePolicies(ctx context.Context, e *env) {
	pols := e.imagePolicies(ctx)
	if len(pols) == 0 {
		return
	}
	copying := e.o.Backup.Spec.Images == images.ModeCopy || e.o.Backup.Spec.Images == images.ModeBundle
	for _, p := range pols {
		var lost, verified, verifiedUsers []string
		for _, u := range e.imageUses() {
			if p.namespace != "" && p.namespace != u.namespace {
				continue
			}
			src := e.sourceRef(u.ref)
			if p.moved && matchesAny(p.globs, src) && !matchesAny(p.globs, u.ref) {
				lost = append(lost, u.ref)
			}
			if matchesAny(p.globs, u.ref) {
				verified = append(verified, u.ref)
				verifiedUsers = append(verifiedUsers, u.users...)
			}
		}
		pats := strings.Join(p.globs, ", ")
		if len(lost) > 0 {
			e.add(report.Warning, "image-policy", []string{p.name}, fmt.Sprintf("%s verifies the signatures of images matching %s; after the registry mappings %d of the move's images no longer match it (%s), so the target would run them unverified",
				p.where, pats, len(lost), firstFew(lost)), "add the mapped registries to the policy's image patterns (Kyverno imageReferences, policy-controller glob): the signatures travel with the images and verify by digest")
		}
		if len(verified) == 0 {
			continue
		}
		objects := append([]string{p.name}, uniq(verifiedUsers)...)
		switch {
		case !e.o.Images.Referrers.KeepsSignatures():
			e.add(report.Blocker, "image-policy", objects, fmt.Sprintf("%s verifies the signatures of %d of the move's images (%s), and the move leaves their referrers (signatures) behind (referrers %s): the target's admission refuses their pods",
				p.where, len(verified), firstFew(verified), e.o.Images.Referrers), "copy the referrers with the images (referrers all, the default), or name the signatures' types ("+strings.Join(images.SignatureTypes, ", ")+")")
		case !copying:
			e.add(report.Warning, "image-policy", objects, fmt.Sprintf("%s verifies the signatures of %d of the move's images (%s), and the move does not copy images (spec.images %s): their signatures must already be in the registries the target pulls from",
				p.where, len(verified), firstFew(verified), e.o.Backup.Spec.Images), "copy the images and their signatures: spec.images copy or bundle (ferry image sync for images outside the move)")
		default:
			e.add(report.Note, "image-policy", objects, fmt.Sprintf("%s verifies the signatures of %d of the move's images (%s): their signatures travel with them (referrers %s) and verify by digest at the new registry",
				p.where, len(verified), firstFew(verified), e.o.Images.Referrers), "")
		}
	}
}

// imagePolicies are the verifying policies the move writes and the
// target's own (a policy kind the target does not serve has none).
func (e *env) imagePolicies(ctx context.Context) []imagePolicy {
	var out []imagePolicy
	moved := map[string]bool{}
	for gk := range policyKinds {
		for _, u := range e.c.byKind[gk] {
			moved[gk+" "+u.GetNamespace()+"/"+u.GetName()] = true
			out = append(out, policiesOf(gk, u, true)...)
		}
	}
	for gk, gvr := range policyKinds {
		if e.t.cluster == nil || e.t.cluster.Dynamic == nil {
			break // no target to read (unit tests)
		}
		l, err := e.t.cluster.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue // not served: no such policies
		case err != nil:
			e.skip("image policies %s of the target: %v", gvr.GroupResource(), err)
			continue
		}
		for i := range l.Items {
			u := &l.Items[i]
			if moved[gk+" "+u.GetNamespace()+"/"+u.GetName()] {
				continue // the move replaces it: judged as moved
			}
			out = append(out, policiesOf(gk, u, false)...)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// policiesOf reads the verifying rules of policy u of kind gk.
func policiesOf(gk string, u *unstructured.Unstructured, moved bool) []imagePolicy {
	where := "the target's "
	if moved {
		where = "the moved "
	}
	id := gk + " " + u.GetName()
	if u.GetNamespace() != "" {
		id = gk + " " + u.GetNamespace() + "/" + u.GetName()
	}
	if gk == "policy.sigstore.dev/ClusterImagePolicy" {
		var globs []string
		imgs, _, _ := unstructured.NestedSlice(u.Object, "spec", "images")
		for _, im := range imgs {
			if m, ok := im.(map[string]any); ok {
				if g, ok := m["glob"].(string); ok && g != "" {
					globs = append(globs, g)
				}
			}
		}
		if len(globs) == 0 {
			return nil
		}
		return []imagePolicy{{name: id, where: where + id, globs: globs, moved: moved}}
	}
	var out []imagePolicy
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	for _, r := range rules {
		rm, ok := r.(map[string]any)
		if !ok {
			continue
		}
		vis, _, _ := unstructured.NestedSlice(rm, "verifyImages")
		var globs []string
		for _, vi := range vis {
			vm, ok := vi.(map[string]any)
			if !ok {
				continue
			}
			refs, _, _ := unstructured.NestedStringSlice(vm, "imageReferences")
			globs = append(globs, refs...)
			if old, ok := vm["image"].(string); ok && old != "" {
				globs = append(globs, old) // the field before imageReferences
			}
		}
		if len(globs) == 0 {
			continue
		}
		rn, _ := rm["name"].(string)
		name := fmt.Sprintf("%s (rule %s)", id, rn)
		out = append(out, imagePolicy{name: name, where: where + name, namespace: u.GetNamespace(), globs: globs, moved: moved})
	}
	return out
}

// matchesAny reports whether ref matches one of the wildcard patterns
// (* any run of characters, slashes included; ? one character), as
// Kyverno and policy-controller match image references. A reference by
// digest is matched with and without its tag.
func matchesAny(globs []string, ref string) bool {
	cands := []string{ref}
	if tag, d := images.SplitTagDigest(ref); tag != "" && d != "" {
		cands = append(cands, ref[:len(ref)-len(d)-1])
	}
	for _, g := range globs {
		re, err := regexp.Compile("^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(g)) + "$")
		if err != nil {
			continue
		}
		for _, c := range cands {
			if re.MatchString(c) {
				return true
			}
		}
	}
	return false
}

func firstFew(refs []string) string {
	refs = uniq(refs)
	if len(refs) > 3 {
		return strings.Join(refs[:3], ", ") + fmt.Sprintf(" and %d more", len(refs)-3)
	}
	return strings.Join(refs, ", ")
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
