package images

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeferry/ferry/internal/testenv"
)

// answerProxy stands in front of a real registry and changes its answers
// to manifest PUTs: "convert" names another digest (a registry that
// stored a converted manifest), "silent" names none. heads counts the
// manifest HEADs it passes on.
func answerProxy(t *testing.T, r *testenv.Registry, mode string, heads *atomic.Int64) string {
	t.Helper()
	u, _ := url.Parse("http://" + r.Host)
	p := httputil.NewSingleHostReverseProxy(u)
	p.ModifyResponse = func(resp *http.Response) error {
		req := resp.Request
		if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/manifests/") {
			switch mode {
			case "convert":
				resp.Header.Set("Docker-Content-Digest", "sha256:"+strings.Repeat("0", 64))
			case "silent":
				resp.Header.Del("Docker-Content-Digest")
			}
		}
		if req.Method == http.MethodHead && strings.Contains(req.URL.Path, "/manifests/") {
			heads.Add(1)
		}
		return nil
	}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// TestCopyKeepsDigests: a target registry that answers a manifest's PUT
// with another digest fails the image, and its signature, naming both
// digests; one that answers with none is asked (HEAD) and the copy
// succeeds; an image the target has is present, with nothing written.
func TestCopyKeepsDigests(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	img := pushImage(t, src, "d/app:1", 1024, 1)
	d, _ := img.Digest()
	signImage(t, src, "d/app", d)
	task := func(host string) Task { return Task{Source: src.Host + "/d/app:1", Target: host + "/d/app:1"} }
	ctx := context.Background()

	var heads atomic.Int64
	conv := answerProxy(t, startRegistry(t, testenv.RegistryOptions{}), "convert", &heads)
	r := NewCopier(Options{Retry: RetryPolicy{Attempts: 1}}).Copy(ctx, task(conv))
	if r.Outcome != Failed || !strings.Contains(r.Error, "changed the manifest") || !strings.Contains(r.Error, d.String()) {
		t.Errorf("converting target: %s %q, want a failure naming the source's digest %s", r.Outcome, r.Error, d)
	}
	if len(r.Referrers) != 1 || r.Referrers[0].Outcome != Failed || !strings.Contains(r.Referrers[0].Error, "changed the manifest") {
		t.Errorf("converting target: referrers %+v, want the signature failed", r.Referrers)
	}

	silentReg := startRegistry(t, testenv.RegistryOptions{})
	heads.Store(0)
	silent := answerProxy(t, silentReg, "silent", &heads)
	c := NewCopier(Options{})
	if r := c.Copy(ctx, task(silent)); r.Outcome != Copied || r.Error != "" || len(r.Referrers) != 1 || r.Referrers[0].Outcome != Copied {
		t.Fatalf("silent target: %+v, want copied with its signature", r)
	}
	// Ours before the signature's write, go-containerregistry's before
	// each, and ours after each, for want of an answer.
	if n := heads.Load(); n != 5 {
		t.Errorf("silent target: %d manifest HEADs, want 5", n)
	}
	if got, ok := digestAt(t, silentReg.Host+"/d/app:1"); !ok || got != d {
		t.Errorf("silent target holds %v (%v), want %s", got, ok, d)
	}

	var plainHeads atomic.Int64
	plain := answerProxy(t, startRegistry(t, testenv.RegistryOptions{}), "", &plainHeads)
	if r := c.Copy(ctx, task(plain)); r.Outcome != Copied || r.Referrers[0].Outcome != Copied {
		t.Fatalf("target: %+v, want copied", r)
	}
	if n := plainHeads.Load(); n != 3 {
		t.Errorf("target: %d manifest HEADs, want 3 (the answers to the PUTs name the digests)", n)
	}
	plainHeads.Store(0)
	if r := c.Copy(ctx, task(plain)); r.Outcome != Present || r.Referrers[0].Outcome != Present || r.BlobBytes != 0 {
		t.Errorf("again: %+v, want present with its signature, nothing sent", r)
	}
}

// TestCopyRelistsReferrer: a target that has an OCI referrer by digest
// but does not list it under its subject (its tag schema index was
// deleted) gets it listed again; go-containerregistry alone skips a
// manifest the registry has, and the referrer failed on every run.
func TestCopyRelistsReferrer(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	dst := startRegistry(t, testenv.RegistryOptions{})
	img := pushImage(t, src, "l/app:1", 1024, 1)
	desc, err := src.Descriptor("l/app:1")
	if err != nil {
		t.Fatal(err)
	}
	sbom, err := src.AttachReferrer("l/app", desc, "application/spdx+json", []byte(`{"spdxVersion":"SPDX-2.3"}`))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	ctx := context.Background()
	task := Task{Source: src.Host + "/l/app:1", Target: dst.Host + "/l/app:1"}
	if r := NewCopier(Options{}).Copy(ctx, task); r.Outcome != Copied || len(r.Referrers) != 1 {
		t.Fatalf("first copy: %+v", r)
	}
	// Delete the target's tag schema index of the image.
	fallback := dst.Host + "/l/app:" + strings.Replace(d.String(), ":", "-", 1)
	idx, ok := digestAt(t, fallback)
	if !ok {
		t.Fatalf("no %s at the target after the copy", fallback)
	}
	if err := remote.Delete(mustRef(t, dst.Host+"/l/app@"+idx.String())); err != nil {
		t.Fatal(err)
	}
	r := NewCopier(Options{}).Copy(ctx, task)
	if r.Outcome != Present || r.Error != "" || len(r.Referrers) != 1 || r.Referrers[0].Outcome != Copied || r.Referrers[0].Digest != sbom.String() {
		t.Fatalf("second copy: %+v, want the image present and its SBOM %s listed again", r, sbom)
	}
	got, err := NewCopier(Options{}).ReferrersOf(ctx, dst.Host+"/l/app:1")
	if err != nil || len(got) != 1 || got[0].Digest != sbom.String() {
		t.Errorf("the target lists %+v (%v), want %s", got, err, sbom)
	}
}

// TestUnmatchedReferrerTypes: a misspelt type in the referrer filter
// copies nothing and is named, with the types the referrers have.
func TestUnmatchedReferrerTypes(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	dst := startRegistry(t, testenv.RegistryOptions{})
	pushImage(t, src, "u/app:1", 512, 1)
	desc, err := src.Descriptor("u/app:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.AttachReferrer("u/app", desc, "application/spdx+json", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	f, err := ParseReferrers([]string{"application/spdx+jsn,application/spdx+json"})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCopier(Options{Referrers: f})
	if r := c.Copy(context.Background(), Task{Source: src.Host + "/u/app:1", Target: dst.Host + "/u/app:1"}); r.Outcome != Copied || len(r.Referrers) != 1 {
		t.Fatalf("%+v, want the image and its SBOM copied", r)
	}
	unmatched, found := c.UnmatchedTypes()
	if strings.Join(unmatched, ",") != "application/spdx+jsn" || strings.Join(found, ",") != "application/spdx+json" {
		t.Errorf("unmatched %q, found %q", unmatched, found)
	}
	if u, _ := NewCopier(Options{}).UnmatchedTypes(); u != nil {
		t.Errorf("no type filter: unmatched %q", u)
	}
}

// TestCopyHeldWhenReferrersUnknown: a source whose cosign tag is listed
// but whose manifest is gone fails the image, naming the tag, and the
// target gets no manifest under the image's tag (the blobs move while the
// referrers are looked for; the manifest waits for the lookup).
func TestCopyHeldWhenReferrersUnknown(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	dst := startRegistry(t, testenv.RegistryOptions{})
	img := pushImage(t, src, "h/app:1", 1024, 1)
	d, _ := img.Digest()
	sig := signImage(t, src, "h/app", d)
	// docker-registry answers the tag from its revision link: without it
	// the tag is listed and its manifest unknown.
	link := filepath.Join(src.Dir, "docker/registry/v2/repositories/h/app/_manifests/revisions/sha256", sig.Hex)
	if err := os.RemoveAll(link); err != nil {
		t.Fatal(err)
	}
	r := NewCopier(Options{Retry: RetryPolicy{Attempts: 1}}).Copy(context.Background(), Task{Source: src.Host + "/h/app:1", Target: dst.Host + "/h/app:1"})
	if r.Outcome != Failed || !strings.Contains(r.Error, testenv.CosignTag(d, "sig")) {
		t.Errorf("%s %q, want a failure naming the tag %s", r.Outcome, r.Error, testenv.CosignTag(d, "sig"))
	}
	if got, ok := digestAt(t, dst.Host+"/h/app:1"); ok {
		t.Errorf("the target has h/app:1 (%s) without its signature", got)
	}
}

// TestCopyAllDuplicates: a task given twice (in two spellings) runs
// once, both results say so; two sources of one target fail, naming each
// other, and the target is not written.
func TestCopyAllDuplicates(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	dst := startRegistry(t, testenv.RegistryOptions{})
	pushImage(t, src, "x/a:1", 512, 1)
	pushImage(t, src, "x/b:1", 512, 1)
	var heads atomic.Int64
	proxy := answerProxy(t, dst, "", &heads)
	tasks := []Task{
		{Source: src.Host + "/x/a:1", Target: proxy + "/x/a:1"},
		{Source: src.Host + "/x/a:1", Target: proxy + "/x/a:1"},
		{Source: src.Host + "/x/a:1", Target: proxy + "/x/a"}, // tag latest: another target
		{Source: src.Host + "/x/a:1", Target: proxy + "/x/c:1"},
		{Source: src.Host + "/x/b:1", Target: proxy + "/x/c:1"},
	}
	var seen atomic.Int64
	rs := NewCopier(Options{}).CopyAll(context.Background(), tasks, func(Result) { seen.Add(1) })
	if rs[0].Outcome != Copied || rs[1].Outcome != Copied || rs[1].Source != tasks[1].Source || rs[2].Outcome != Copied || seen.Load() != 5 {
		t.Errorf("results %+v (%d reported), want the first three copied and each reported", rs[:3], seen.Load())
	}
	if rs[0].BlobBytes == 0 || rs[1].BlobBytes != 0 {
		t.Errorf("blob bytes %d and %d, want the copy's counted once", rs[0].BlobBytes, rs[1].BlobBytes)
	}
	if n := heads.Load(); n != 2 {
		t.Errorf("%d manifest HEADs at the target, want 2 (x/a:1 once, x/a:latest)", n)
	}
	for i, other := range map[int]string{3: "/x/b:1", 4: "/x/a:1"} {
		if rs[i].Outcome != Failed || !strings.Contains(rs[i].Error, "is the target of "+src.Host+other+" too") {
			t.Errorf("task %d: %s %q, want a failure naming %s", i, rs[i].Outcome, rs[i].Error, other)
		}
	}
	if _, ok := digestAt(t, dst.Host+"/x/c:1"); ok {
		t.Error("the contested target x/c:1 was written")
	}
}

// TestCopyKeepsTargetSignature: a target whose cosign tag of the image
// holds its own signature (another digest) keeps it: the source's
// signature fails, naming both, instead of overwriting it.
func TestCopyKeepsTargetSignature(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	dst := startRegistry(t, testenv.RegistryOptions{})
	img := pushImage(t, src, "s/app:1", 512, 1)
	d, _ := img.Digest()
	signImage(t, src, "s/app", d)
	if err := remote.Write(mustRef(t, dst.Host+"/s/app:1"), img); err != nil {
		t.Fatal(err)
	}
	own := signImage(t, dst, "s/app", d)
	r := NewCopier(Options{}).Copy(context.Background(), Task{Source: src.Host + "/s/app:1", Target: dst.Host + "/s/app:1"})
	if r.Outcome != Failed || len(r.Referrers) != 1 || !strings.Contains(r.Referrers[0].Error, "names its own "+own.String()) {
		t.Errorf("%s %q, referrers %+v; want the signature failed, naming the target's own %s", r.Outcome, r.Error, r.Referrers, own)
	}
	if got, _ := digestAt(t, dst.Host+"/s/app:"+testenv.CosignTag(d, "sig")); got != own {
		t.Errorf("the target's signature tag names %s, want its own %s kept", got, own)
	}
}

// signImage signs digest d in repo of r with a new key (a cosign .sig
// tag) and returns the signature's digest.
func signImage(t *testing.T, r *testenv.Registry, repo string, d v1.Hash) v1.Hash {
	t.Helper()
	signer, err := testenv.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := r.SignCosign(repo, d, signer)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}
