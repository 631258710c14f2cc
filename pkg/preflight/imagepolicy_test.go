package preflight

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
)

const pinned = "@sha256:1111111111111111111111111111111111111111111111111111111111111111"

func signedDeployment(image string) *appsv1.Deployment {
	return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}}}}}
}

func kyvernoPolicy(name string, refs ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"rules": []any{
			map[string]any{"name": "other", "validate": map[string]any{}},
			map[string]any{"name": "verify", "verifyImages": []any{map[string]any{"imageReferences": refs}}},
		}}}}
}

// policyEnv plans a Deployment of the mapped image and the moved
// policies, against a target holding targetObjs.
func policyEnv(t *testing.T, mode string, refs images.ReferrerFilter, moved []*unstructured.Unstructured, targetObjs ...runtime.Object) *env {
	e := newTestEnv(t, signedDeployment("new.example.com/shop/web:1"+pinned))
	for _, u := range moved {
		e.c.observe("clusterpolicies.kyverno.io", u)
	}
	e.o.Backup.Spec.Images = mode
	e.o.Images.Referrers = refs
	e.o.Restore.Spec.ImageRegistryMappings = []string{"old.example.com/shop=new.example.com/shop"}
	lists := map[schema.GroupVersionResource]string{}
	for _, gvr := range policyKinds {
		lists[gvr] = strings.TrimSuffix(gvr.Resource, "s") + "List"
	}
	e.t.cluster = &kube.Cluster{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, targetObjs...)}
	return e
}

func risksOf(p *report.Preflight, sev report.Severity) []report.Risk {
	var out []report.Risk
	for _, r := range p.Risks {
		if r.Check == "image-policy" && r.Severity == sev {
			out = append(out, r)
		}
	}
	return out
}

// TestImagePolicies: a moved Kyverno policy that matched the image only
// under its old registry warns; the target's policy-controller policy
// that matches the mapped image is a note when the signatures travel,
// and a blocker with referrers none.
func TestImagePolicies(t *testing.T) {
	cip := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "policy.sigstore.dev/v1beta1", "kind": "ClusterImagePolicy", "metadata": map[string]any{"name": "signed-only"},
		"spec": map[string]any{"images": []any{map[string]any{"glob": "new.example.com/**"}}}}}
	moved := []*unstructured.Unstructured{kyvernoPolicy("check-signed", "old.example.com/shop/*")}
	e := policyEnv(t, images.ModeBundle, images.ReferrerFilter{}, moved, cip)
	checkImagePolicies(context.Background(), e)
	w := risksOf(e.p, report.Warning)
	if len(w) != 1 || w[0].Objects[0] != "kyverno.io/ClusterPolicy check-signed (rule verify)" || !strings.Contains(w[0].What, "no longer match it (new.example.com/shop/web:1"+pinned+")") {
		t.Errorf("warnings %+v, want the moved policy that no longer matches", w)
	}
	n := risksOf(e.p, report.Note)
	if len(n) != 1 || n[0].Objects[0] != "policy.sigstore.dev/ClusterImagePolicy signed-only" || n[0].Objects[1] != "deployments.apps shop/web" || !strings.Contains(n[0].What, "travel with them (referrers all)") {
		t.Errorf("notes %+v, want the target's policy, its signatures travelling", n)
	}
	if b := risksOf(e.p, report.Blocker); len(b) != 0 {
		t.Errorf("blockers %+v", b)
	}

	e = policyEnv(t, images.ModeBundle, images.ReferrerFilter{None: true}, nil, cip)
	checkImagePolicies(context.Background(), e)
	if b := risksOf(e.p, report.Blocker); len(b) != 1 || !strings.Contains(b[0].What, "leaves their referrers (signatures) behind") {
		t.Errorf("referrers none: blockers %+v", b)
	}

	// A type filter that keeps the SBOMs only leaves the signatures behind.
	sboms, err := images.ParseReferrers([]string{"application/spdx+json"})
	if err != nil {
		t.Fatal(err)
	}
	e = policyEnv(t, images.ModeBundle, sboms, nil, cip)
	checkImagePolicies(context.Background(), e)
	if b := risksOf(e.p, report.Blocker); len(b) != 1 || !strings.Contains(b[0].What, "leaves their referrers (signatures) behind") || !strings.Contains(b[0].What, "referrers application/spdx+json") {
		t.Errorf("referrers of SBOMs only: blockers %+v", b)
	}
	sigs, err := images.ParseReferrers([]string{"application/vnd.dev.cosign.simplesigning.v1+json"})
	if err != nil {
		t.Fatal(err)
	}
	e = policyEnv(t, images.ModeBundle, sigs, nil, cip)
	checkImagePolicies(context.Background(), e)
	if b := risksOf(e.p, report.Blocker); len(b) != 0 {
		t.Errorf("referrers of cosign signatures: blockers %+v", b)
	}

	// A moved policy updated for the new registry, and images not copied.
	e = policyEnv(t, images.ModeRecord, images.ReferrerFilter{}, []*unstructured.Unstructured{kyvernoPolicy("check-signed", "old.example.com/*", "new.example.com/*")})
	checkImagePolicies(context.Background(), e)
	if w := risksOf(e.p, report.Warning); len(w) != 1 || !strings.Contains(w[0].What, "does not copy images (spec.images record)") {
		t.Errorf("record mode: warnings %+v", w)
	}
	// Nothing verifies the images: nothing to say.
	e = policyEnv(t, images.ModeBundle, images.ReferrerFilter{}, []*unstructured.Unstructured{kyvernoPolicy("other", "quay.io/*")})
	checkImagePolicies(context.Background(), e)
	if len(e.p.Risks) != 0 {
		t.Errorf("an unrelated policy: %+v", e.p.Risks)
	}
}

func TestMatchesAny(t *testing.T) {
	for _, c := range []struct {
		glob, ref string
		want      bool
	}{
		{"ghcr.io/org/*", "ghcr.io/org/team/app:1", true},
		{"ghcr.io/org/*", "ghcr.io/other/app:1", false},
		{"ghcr.io/org/app:?", "ghcr.io/org/app:1" + pinned, true},
		{"*", "anything", true},
		{"ghcr.io/org/app", "ghcr.io/org/app:1", false},
	} {
		if got := matchesAny([]string{c.glob}, c.ref); got != c.want {
			t.Errorf("%s ~ %s: %v", c.glob, c.ref, got)
		}
	}
}
