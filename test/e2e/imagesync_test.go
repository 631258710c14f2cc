package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeferry/ferry/internal/testenv"
)

type syncOutput struct {
	Images []struct {
		Source, Target, Outcome, Digest, Error string
		BlobBytes                              int64
		Platforms                              []string
	} `json:"images"`
	Failed    int   `json:"failed"`
	BlobBytes int64 `json:"blobBytes"`
}

func startRegistries(t *testing.T, opts ...testenv.RegistryOptions) []*testenv.Registry {
	t.Helper()
	var out []*testenv.Registry
	for _, o := range opts {
		r, err := testenv.StartRegistry(context.Background(), t, o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// dockerConfig writes a docker config.json with basic credentials for
// host and returns "DOCKER_CONFIG=dir".
func dockerConfig(t *testing.T, host, user, password string) string {
	t.Helper()
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return "DOCKER_CONFIG=" + dir
}

func TestImageSync(t *testing.T) {
	rs := startRegistries(t, testenv.RegistryOptions{}, testenv.RegistryOptions{})
	src, dst := rs[0], rs[1]
	idx, err := src.PushIndex("multi/app:1", "linux/amd64", "linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"1.0", "1.1", "2.0"} {
		if _, err := src.PushImage("single/app:"+tag, 64<<10, 2); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "sync.yaml")
	body := fmt.Sprintf("images:\n  %s/multi/app: %s/multi/app\n  %s/single/app:/^1\\./: [%s/single/app, %s/copy/app]\n", src.Host, dst.Host, src.Host, dst.Host, dst.Host)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (syncOutput, result) {
		r := ferry(t, []string{"DOCKER_CONFIG=" + t.TempDir()}, append([]string{"image", "sync", "-o", "json"}, args...)...)
		var out syncOutput
		if r.code == 0 || r.code == 2 {
			mustJSON(t, r.stdout, &out)
		}
		return out, r
	}
	out, r := run("--config", cfg)
	if r.code != 0 || len(out.Images) != 5 || out.Failed != 0 {
		t.Fatalf("first sync: exit %d, %+v\n%s", r.code, out, r.stderr)
	}
	for _, repo := range []string{"multi/app:1", "single/app:1.0", "single/app:1.1", "copy/app:1.0", "copy/app:1.1"} {
		sd, _ := src.Digest(strings.Replace(repo, "copy/", "single/", 1))
		if dd, ok := dst.Digest(repo); !ok || dd != sd {
			t.Errorf("%s at target: %v %v, want %v", repo, dd, ok, sd)
		}
	}
	if _, ok := dst.Digest("single/app:2.0"); ok {
		t.Error("single/app:2.0 does not match the tag regex but was copied")
	}
	out, r = run("--config", cfg)
	if r.code != 0 || out.BlobBytes != 0 {
		t.Fatalf("second sync: exit %d, %d blob bytes, want 0: %+v", r.code, out.BlobBytes, out)
	}
	for _, im := range out.Images {
		if im.Outcome != "present" {
			t.Errorf("second sync %s: %s, want present", im.Source, im.Outcome)
		}
	}
	t.Logf("second sync of unchanged images sent %d blob bytes", out.BlobBytes)

	// One-off copy of one platform.
	out, r = run("--from", src.Host+"/multi/app:1", "--to", dst.Host+"/amd/app", "--platform", "linux/amd64")
	if r.code != 0 || len(out.Images) != 1 || strings.Join(out.Images[0].Platforms, ",") != "linux/amd64" {
		t.Fatalf("--platform: exit %d %+v %s", r.code, out, r.stderr)
	}
	got, err := remote.Index(mustParse(t, dst.Host+"/amd/app:1"))
	if err != nil {
		t.Fatal(err)
	}
	gim, _ := got.IndexManifest()
	im, _ := idx.IndexManifest()
	for _, m := range im.Manifests {
		_, has := dst.Digest("amd/app@" + m.Digest.String())
		if has != (m.Platform.String() == "linux/amd64") {
			t.Errorf("%s present: %v", m.Platform, has)
		}
	}
	if len(gim.Manifests) != 1 {
		t.Errorf("filtered index has %d manifests", len(gim.Manifests))
	}
}

func TestImageSyncBadInput(t *testing.T) {
	rs := startRegistries(t, testenv.RegistryOptions{}, testenv.RegistryOptions{}, testenv.RegistryOptions{User: "ferry", Password: "right"})
	src, dst, locked := rs[0], rs[1], rs[2]
	if _, err := src.PushImage("ok/app:1", 4096, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := locked.PushImage("private/app:1", 4096, 1); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "sync.yaml")
	body := fmt.Sprintf("images:\n  127.0.0.1:1/gone/app:1: %s/gone/app\n  %s/private/app:1: %s/private/app\n  %s/ok/app:1: %s/ok/app\n", dst.Host, locked.Host, dst.Host, src.Host, dst.Host)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := ferry(t, []string{dockerConfig(t, locked.Host, "ferry", "wrong")}, "image", "sync", "--config", cfg, "--image-retries", "2")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2 (partially failed)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"127.0.0.1:1/gone/app:1: source registry unreachable", locked.Host + "/private/app:1: access denied"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if _, ok := dst.Digest("ok/app:1"); !ok {
		t.Errorf("the good image did not arrive:\n%s", r.stdout)
	}
	// With the right credential in the docker config, the private image goes.
	r = ferry(t, []string{dockerConfig(t, locked.Host, "ferry", "right")}, "image", "sync", "--from", locked.Host+"/private/app:1", "--to", dst.Host+"/private/app")
	if r.code != 0 {
		t.Fatalf("right credential: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Malformed flags are refused before anything runs.
	r = ferry(t, nil, "image", "sync", "--from", src.Host+"/ok/app:1")
	if r.code != 1 || !strings.Contains(r.stderr, "--from and --to go together") {
		t.Errorf("--from alone: exit %d %s", r.code, r.stderr)
	}
}

func mustParse(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestImageSyncNestedIndex: `ferry image sync --platform linux/arm64` of
// an index whose entries are themselves indexes (as `docker buildx
// imagetools create` makes from several multi-platform images) descends
// into them: the target gets the outer index holding one nested index
// that holds only the arm64 image, with its digest unchanged.
func TestImageSyncNestedIndex(t *testing.T) {
	rs := startRegistries(t, testenv.RegistryOptions{}, testenv.RegistryOptions{})
	src, dst := rs[0], rs[1]
	byPlatform := map[string]v1.Image{}
	nested := func(plats ...string) v1.ImageIndex {
		var adds []mutate.IndexAddendum
		for _, p := range plats {
			img, err := random.Image(1024, 2)
			if err != nil {
				t.Fatal(err)
			}
			pl, _ := v1.ParsePlatform(p)
			byPlatform[p] = img
			adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: pl}})
		}
		return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	}
	outer := mutate.IndexMediaType(mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: nested("linux/amd64", "linux/arm64")},
		mutate.IndexAddendum{Add: nested("linux/s390x")}), types.OCIImageIndex)
	if err := remote.WriteIndex(mustParse(t, src.Host+"/nested/app:1"), outer); err != nil {
		t.Fatal(err)
	}
	r := ferry(t, []string{"DOCKER_CONFIG=" + t.TempDir()}, "image", "sync", "-o", "json", "--from", src.Host+"/nested/app:1", "--to", dst.Host+"/arm/app", "--platform", "linux/arm64")
	var out syncOutput
	if r.code == 0 || r.code == 2 {
		mustJSON(t, r.stdout, &out)
	}
	if r.code != 0 || len(out.Images) != 1 || strings.Join(out.Images[0].Platforms, ",") != "linux/arm64" {
		t.Fatalf("--platform linux/arm64 of a nested index: exit %d %+v\n%s%s", r.code, out, r.stdout, r.stderr)
	}
	got, err := remote.Index(mustParse(t, dst.Host+"/arm/app:1"))
	if err != nil {
		t.Fatal(err)
	}
	gim, _ := got.IndexManifest()
	if len(gim.Manifests) != 1 || !gim.Manifests[0].MediaType.IsIndex() {
		t.Fatalf("target index holds %+v, want one nested index", gim.Manifests)
	}
	child, err := got.ImageIndex(gim.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cim, _ := child.IndexManifest()
	arm, _ := byPlatform["linux/arm64"].Digest()
	if len(cim.Manifests) != 1 || cim.Manifests[0].Digest != arm || cim.Manifests[0].Platform.String() != "linux/arm64" {
		t.Errorf("nested index at the target holds %+v, want only linux/arm64 %s", cim.Manifests, arm)
	}
	for p, img := range byPlatform {
		d, _ := img.Digest()
		if _, has := dst.Digest("arm/app@" + d.String()); has != (p == "linux/arm64") {
			t.Errorf("%s (%s) at the target: %v", p, d, has)
		}
	}
	// A platform no image has is refused, naming the platforms it has.
	r = ferry(t, []string{"DOCKER_CONFIG=" + t.TempDir()}, "image", "sync", "--from", src.Host+"/nested/app:1", "--to", dst.Host+"/ppc/app", "--platform", "linux/ppc64le")
	if all := r.stdout + r.stderr; r.code == 0 || !strings.Contains(all, "(it has linux/amd64, linux/arm64, linux/s390x)") {
		t.Errorf("--platform linux/ppc64le: exit %d, want a failure naming the nested platforms\n%s", r.code, all)
	}
}
