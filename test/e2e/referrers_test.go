package e2e

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/kubeferry/ferry/internal/testenv"
)

// signedFixture is a source registry's signed images:
//   - signed/app:1, an image with a cosign .sig and .att;
//   - multi/app:1, a two-platform index whose manifests each have an OCI
//     1.1 SBOM referrer (Debian's docker-registry has no referrers API:
//     the referrers tag schema's index), whose first SBOM has a cosign
//     signature of its own, and whose index has a Notation-type OCI
//     signature.
type signedFixture struct {
	signer *testenv.Signer
	// refs are the referrers, each with its repository ("signed/app").
	refs []fixtureRef
	// digests of signed/app:1 and multi/app:1.
	signed, multi v1.Hash
}

type fixtureRef struct {
	repo, subject, digest, tag string
}

func pushSignedFixture(t *testing.T, src *testenv.Registry, prefix string) *signedFixture {
	t.Helper()
	s, err := testenv.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	f := &signedFixture{signer: s}
	must := func(h v1.Hash, err error) v1.Hash {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	signed := prefix + "signed/app"
	img, err := src.PushImage(signed+":1", 32<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	f.signed, _ = img.Digest()
	sig := must(src.SignCosign(signed, f.signed, s))
	att := must(src.AttestCosign(signed, f.signed, s))
	f.refs = append(f.refs, fixtureRef{signed, f.signed.String(), sig.String(), testenv.CosignTag(f.signed, "sig")},
		fixtureRef{signed, f.signed.String(), att.String(), testenv.CosignTag(f.signed, "att")})

	multi := prefix + "multi/app"
	idx, err := src.PushIndex(multi+":1", "linux/amd64", "linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	f.multi, _ = idx.Digest()
	im, _ := idx.IndexManifest()
	for i, m := range im.Manifests {
		sub := v1.Descriptor{MediaType: m.MediaType, Digest: m.Digest, Size: m.Size}
		sbom := must(src.AttachReferrer(multi, sub, testenv.SPDXType, []byte(fmt.Sprintf(`{"spdxVersion":"SPDX-2.3","name":"%s"}`, m.Platform))))
		f.refs = append(f.refs, fixtureRef{multi, m.Digest.String(), sbom.String(), ""})
		if i == 0 {
			nested := must(src.SignCosign(multi, sbom, s))
			f.refs = append(f.refs, fixtureRef{multi, sbom.String(), nested.String(), testenv.CosignTag(sbom, "sig")})
		}
	}
	root, err := src.Descriptor(multi + ":1")
	if err != nil {
		t.Fatal(err)
	}
	notation := must(src.AttachReferrer(multi, v1.Descriptor{MediaType: root.MediaType, Digest: root.Digest, Size: root.Size}, testenv.NotationSignatureType, []byte(`{"payload":"test"}`)))
	f.refs = append(f.refs, fixtureRef{multi, f.multi.String(), notation.String(), ""})
	return f
}

// checkReferrersArrived checks, with go-containerregistry alone, that
// every referrer of f is in dst under repo's mapping (mapRepo): the same
// manifest bytes as in src, by digest; a cosign tag naming it; an OCI
// referrer listed under its subject (referrers API or its tag schema).
func checkReferrersArrived(t *testing.T, src, dst *testenv.Registry, f *signedFixture, mapRepo func(string) string, keep func(fixtureRef) bool) {
	t.Helper()
	for _, r := range f.refs {
		target := mapRepo(r.repo)
		got, err := rawManifest(dst.Host + "/" + target + "@" + r.digest)
		if !keep(r) {
			if err == nil {
				t.Errorf("referrer %s (%s) of %s arrived, but the filter leaves it out", r.digest, r.tag, r.subject)
			}
			continue
		}
		if err != nil {
			t.Errorf("referrer %s (tag %q) of %s is not in %s: %v", r.digest, r.tag, r.subject, target, err)
			continue
		}
		want, err := rawManifest(src.Host + "/" + r.repo + "@" + r.digest)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("referrer %s in %s: manifest bytes differ from the source's", r.digest, target)
		}
		if r.tag != "" {
			if d, ok := dst.Digest(target + ":" + r.tag); !ok || d.String() != r.digest {
				t.Errorf("tag %s in %s names %v (%v), want %s", r.tag, target, d, ok, r.digest)
			}
			continue
		}
		sub, _ := name.NewDigest(dst.Host + "/" + target + "@" + r.subject)
		idx, err := remote.Referrers(sub)
		if err != nil {
			t.Fatalf("referrers of %s: %v", sub, err)
		}
		im, _ := idx.IndexManifest()
		listed := false
		for _, d := range im.Manifests {
			listed = listed || d.Digest.String() == r.digest
		}
		if !listed {
			t.Errorf("referrer %s is in %s but not listed under %s", r.digest, target, r.subject)
		}
	}
}

func rawManifest(ref string) ([]byte, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	d, err := remote.Get(r)
	if err != nil {
		return nil, err
	}
	return d.Manifest, nil
}

// verifyCosignSignature checks the cosign signature of repo's image at
// reg with sigstore's verification library (github.com/sigstore/sigstore,
// the one cosign verifies keys with): the signature over the payload
// with the fixture's public key, and the payload naming the digest reg
// has for repo:1.
func verifyCosignSignature(t *testing.T, reg *testenv.Registry, repo string, f *signedFixture) {
	t.Helper()
	digest, ok := reg.Digest(repo + ":1")
	if !ok {
		t.Fatalf("%s:1 is not in %s", repo, reg.Host)
	}
	ref, _ := name.ParseReference(reg.Host + "/" + repo + ":" + testenv.CosignTag(digest, "sig"))
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("signature of %s@%s: %v", repo, digest, err)
	}
	m, _ := img.Manifest()
	layers, _ := img.Layers()
	if len(layers) != 1 || len(m.Layers) != 1 {
		t.Fatalf("signature has %d layers", len(layers))
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	payload := new(bytes.Buffer)
	_, _ = payload.ReadFrom(rc)
	rc.Close()
	sig, err := base64.StdEncoding.DecodeString(m.Layers[0].Annotations[testenv.CosignSignatureAnno])
	if err != nil {
		t.Fatal(err)
	}
	pemKey, _ := f.signer.PublicPEM()
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(payload.Bytes())); err != nil {
		t.Errorf("the signature in %s does not verify: %v", reg.Host, err)
	}
	var p struct {
		Critical struct {
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			} `json:"image"`
		} `json:"critical"`
	}
	if err := json.Unmarshal(payload.Bytes(), &p); err != nil || p.Critical.Image.Digest != digest.String() {
		t.Errorf("the signed payload names %q, the registry has %s (%v)", p.Critical.Image.Digest, digest, err)
	}
}

type referrerSyncOutput struct {
	Images []struct {
		Source, Target, Outcome, Digest, Error string
		Waits                                  int64
		Referrers                              []struct{ Subject, Digest, Tag, Outcome, Error string }
	} `json:"images"`
	Failed     int `json:"failed"`
	Referrers  int `json:"referrers"`
	Waits      int64
	Registries []struct {
		Host        string
		Waits       int64
		WaitSeconds float64
	} `json:"registries"`
}

// TestImageReferrers: `ferry image sync` carries every referrer of the
// fixture (cosign tags, OCI 1.1 referrers of an index's manifests, a
// referrer's own signature) byte-equal by digest; the cosign signature
// verifies against the target's copy; a second sync finds them all
// present; --referrers filters by artifact type; a platform filter that
// would make a new index of a signed index is refused; and a registry
// answering 429 with Retry-After: 2 is waited out.
func TestImageReferrers(t *testing.T) {
	rs := startRegistries(t, testenv.RegistryOptions{}, testenv.RegistryOptions{})
	src, dst := rs[0], rs[1]
	f := pushSignedFixture(t, src, "")
	sync := func(extra ...string) (referrerSyncOutput, result) {
		args := append([]string{"image", "sync", "-o", "json", "--from", src.Host + "/signed/app", "--to", dst.Host + "/signed/app"}, extra...)
		r := ferry(t, []string{"DOCKER_CONFIG=" + t.TempDir()}, args...)
		var out referrerSyncOutput
		if r.code == 0 || r.code == 2 {
			mustJSON(t, r.stdout, &out)
		}
		return out, r
	}
	// The whole repository: its cosign tags are not images of their own,
	// they travel with the image they sign.
	out, r := sync()
	if r.code != 0 || out.Referrers != 2 || len(out.Images) != 1 {
		t.Fatalf("sync of signed/app: exit %d, %d images, %d referrers\n%s%s", r.code, len(out.Images), out.Referrers, r.stdout, r.stderr)
	}
	cfg := writeSyncConfig(t, fmt.Sprintf("images:\n  %s/multi/app:1: %s/multi/app\n", src.Host, dst.Host))
	r = ferry(t, []string{"DOCKER_CONFIG=" + t.TempDir()}, "image", "sync", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "1 images (4 referrers), 0 failed") {
		t.Fatalf("sync of multi/app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	same := func(repo string) string { return repo }
	all := func(fixtureRef) bool { return true }
	checkReferrersArrived(t, src, dst, f, same, all)
	verifyCosignSignature(t, dst, "signed/app", f)

	out, r = sync()
	for _, im := range out.Images {
		for _, ref := range im.Referrers {
			if ref.Outcome != "present" {
				t.Errorf("second sync: referrer %s: %s, want present", ref.Digest, ref.Outcome)
			}
		}
	}
	if r.code != 0 || out.Referrers != 2 {
		t.Errorf("second sync: exit %d, %+v", r.code, out)
	}

	// Only the SBOMs, into another repository.
	r = ferry(t, []string{"DOCKER_CONFIG=" + t.TempDir()}, "image", "sync", "--from", src.Host+"/multi/app:1", "--to", dst.Host+"/sboms/app", "--referrers", testenv.SPDXType)
	if r.code != 0 {
		t.Fatalf("--referrers %s: exit %d\n%s%s", testenv.SPDXType, r.code, r.stdout, r.stderr)
	}
	toSBOMs := func(string) string { return "sboms/app" }
	checkReferrersArrived(t, src, dst, f, toSBOMs, func(r fixtureRef) bool { return r.repo == "multi/app" && r.tag == "" && r.subject != f.multi.String() })

	// A platform filter would make a new index: its signature would be
	// lost, so the copy is refused, naming the referrers.
	r = ferry(t, []string{"DOCKER_CONFIG=" + t.TempDir()}, "image", "sync", "--from", src.Host+"/multi/app:1", "--to", dst.Host+"/amd/app", "--platform", "linux/amd64")
	var onIndex string // the index's own referrer (a Notation signature)
	for _, x := range f.refs {
		if x.subject == f.multi.String() {
			onIndex = x.digest
		}
	}
	if r.code == 0 || !strings.Contains(r.stdout, "makes a new index") || !strings.Contains(r.stdout, "instead of "+f.multi.String()+", and its referrer "+onIndex+" (") {
		t.Errorf("--platform of a signed index: exit %d, want a refusal naming its referrers\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, ok := dst.Digest("amd/app:1"); ok {
		t.Error("the refused index was written")
	}
	r = ferry(t, []string{"DOCKER_CONFIG=" + t.TempDir()}, "image", "sync", "--from", src.Host+"/multi/app:1", "--to", dst.Host+"/amd/app", "--platform", "linux/amd64", "--referrers", "none")
	if r.code != 0 {
		t.Errorf("--platform with --referrers none: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = ferry(t, nil, "image", "sync", "--from", src.Host+"/multi/app:1", "--to", dst.Host+"/x/app", "--referrers", "all,"+testenv.SPDXType)
	if r.code != 1 || !strings.Contains(r.stderr, "--referrers") {
		t.Errorf("--referrers all,TYPE: exit %d, want a refusal\n%s", r.code, r.stderr)
	}

	t.Run("retry_after", func(t *testing.T) { syncThrottled(t, src, dst, f) })
}

func writeSyncConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sync.yaml")
	writeFile(t, p, body)
	return p
}

// syncThrottled syncs the fixture through a proxy of dst that answers
// 429 Too Many Requests with Retry-After: 2 to every request in its
// first 3 seconds: the sync waits, finishes with nothing failed, and
// reports the waits.
func syncThrottled(t *testing.T, src, dst *testenv.Registry, f *signedFixture) {
	u, _ := url.Parse("http://" + dst.Host)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var first atomic.Int64
	var refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		first.CompareAndSwap(0, time.Now().UnixNano())
		if time.Since(time.Unix(0, first.Load())) < 3*time.Second {
			refused.Add(1)
			w.Header().Set("Retry-After", "2")
			http.Error(w, `{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}`, http.StatusTooManyRequests)
			return
		}
		proxy.ServeHTTP(w, req)
	}))
	defer srv.Close()
	throttled := strings.TrimPrefix(srv.URL, "http://")
	cfg := writeSyncConfig(t, fmt.Sprintf("images:\n  %s/signed/app:1: %s/throttled/signed\n  %s/multi/app:1: %s/throttled/multi\n", src.Host, throttled, src.Host, throttled))
	start := time.Now()
	r := ferry(t, []string{"DOCKER_CONFIG=" + t.TempDir()}, "image", "sync", "-o", "json", "--config", cfg)
	took := time.Since(start)
	var out referrerSyncOutput
	if r.code == 0 || r.code == 2 {
		mustJSON(t, r.stdout, &out)
	}
	if r.code != 0 || out.Failed != 0 || out.Referrers != 6 {
		t.Fatalf("throttled sync: exit %d, %d failed, %d referrers\n%s%s", r.code, out.Failed, out.Referrers, r.stdout, r.stderr)
	}
	if len(out.Registries) != 1 || out.Registries[0].Host != throttled || out.Registries[0].Waits < 1 || out.Registries[0].WaitSeconds < 2 || out.Waits < 1 {
		t.Errorf("the waits are not reported: %+v, %d in the images", out.Registries, out.Waits)
	}
	if took < 3*time.Second || refused.Load() == 0 {
		t.Errorf("the sync took %s with %d refusals: it did not wait", took, refused.Load())
	}
	t.Logf("throttled sync: %d requests refused with 429, %d waits (%.1fs) reported, %s in all", refused.Load(), out.Registries[0].Waits, out.Registries[0].WaitSeconds, took.Round(100*time.Millisecond))
	mapped := func(repo string) string { return "throttled/" + strings.TrimSuffix(repo, "/app") }
	checkReferrersArrived(t, src, dst, f, mapped, func(fixtureRef) bool { return true })
}

// TestImageReferrersMigrate: a bundled migrate (`--images bundle
// --push-images`) carries the referrers through the store: each is in
// the target registry byte-equal by digest, listed under its subject;
// the signature verifies against the target's copy; and the
// verification's image rows list the referrers present.
func TestImageReferrersMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	regs := startRegistries(t, testenv.RegistryOptions{}, testenv.RegistryOptions{})
	src, dst := regs[0], regs[1]
	f := pushSignedFixture(t, src, "shop/")
	deploy := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: signed, namespace: shop}
spec:
  replicas: 0
  selector: {matchLabels: {app: signed}}
  template:
    metadata: {labels: {app: signed}}
    spec:
      containers: [{name: app, image: "%s/shop/signed/app:1"}, {name: side, image: "%s/shop/multi/app:1"}]
`, src.Host, src.Host)
	p := filepath.Join(t.TempDir(), "deploy.yaml")
	writeFile(t, p, "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n"+deploy)
	if _, err := testenv.Apply(context.Background(), e.src.Config, "", p); err != nil {
		t.Fatal(err)
	}
	reportDir := filepath.Join(t.TempDir(), "report")
	r := e.run(t, "migrate", "--from-context", "src", "--to-context", "dst", "--name", "mig", "--include-namespaces", "shop",
		"--images", "bundle", "--push-images", "--image-registry-mappings", src.Host+"/shop="+dst.Host+"/mirror", "--report-dir", reportDir)
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	toMirror := func(repo string) string { return "mirror/" + strings.TrimPrefix(repo, "shop/") }
	checkReferrersArrived(t, src, dst, f, toMirror, func(fixtureRef) bool { return true })
	verifyCosignSignature(t, dst, "mirror/signed/app", f)

	// The report's image rows name the referrers that travelled; whether
	// they are in the target registry is the runtime check's (a target
	// with nodes: pkg/running TestCheckImages).
	var rep struct {
		Images []struct{ Name, Detail, Outcome, Message string } `json:"images"`
	}
	data, err := os.ReadFile(filepath.Join(reportDir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	mustJSON(t, string(data), &rep)
	want := map[string]int{src.Host + "/shop/signed/app:1": 2, src.Host + "/shop/multi/app:1": 4}
	for _, im := range rep.Images {
		n, ok := want[im.Name]
		if !ok {
			continue
		}
		delete(want, im.Name)
		if im.Outcome != "bundled" || !strings.Contains(im.Message, fmt.Sprintf("%d referrers (signatures, attestations, SBOMs): ", n)) {
			t.Errorf("report row %s: %s %q, want bundled with %d referrers", im.Name, im.Outcome, im.Message, n)
		}
	}
	if len(want) > 0 {
		t.Errorf("the report has no image rows for %v: %+v", want, rep.Images)
	}
}
