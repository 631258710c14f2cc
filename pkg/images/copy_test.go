package images

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeferry/ferry/internal/testenv"
)

func startRegistry(t *testing.T, opts testenv.RegistryOptions) *testenv.Registry {
	t.Helper()
	if testing.Short() {
		t.Skip("needs docker-registry")
	}
	r, err := testenv.StartRegistry(context.Background(), t, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// pushImage pushes a random image of layers layers of size bytes each.
func pushImage(t *testing.T, r *testenv.Registry, repoTag string, size int64, layers int) v1.Image {
	t.Helper()
	img, err := r.PushImage(repoTag, size, layers)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// pushIndex pushes an index of one random image per platform.
func pushIndex(t *testing.T, r *testenv.Registry, repoTag string, plats ...string) v1.ImageIndex {
	t.Helper()
	idx, err := r.PushIndex(repoTag, plats...)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func digestAt(t *testing.T, ref string) (v1.Hash, bool) {
	t.Helper()
	d, err := remote.Head(mustRef(t, ref))
	if err != nil {
		return v1.Hash{}, false
	}
	return d.Digest, true
}

func expectOK(t *testing.T, rs []Result, fails []Result) {
	t.Helper()
	for _, r := range append(fails, rs...) {
		if r.Outcome == Failed {
			t.Fatalf("%s -> %s failed: %s", r.Source, r.Target, r.Error)
		}
	}
}

func TestCopyMultiArch(t *testing.T) {
	ctx := context.Background()
	src, dst := startRegistry(t, testenv.RegistryOptions{}), startRegistry(t, testenv.RegistryOptions{})
	idx := pushIndex(t, src, "multi/app:1", "linux/amd64", "linux/arm64")
	img := pushImage(t, src, "single/app:2", 4096, 2)
	idxDigest, _ := idx.Digest()
	imgDigest, _ := img.Digest()

	c := NewCopier(Options{})
	tasks, fails := c.Expand(ctx, []Rule{{Source: src.Host + "/multi/app", Targets: []string{dst.Host + "/m/app"}}, {Source: src.Host + "/single/app:2", Targets: []string{dst.Host + "/s/app"}}})
	if len(tasks) != 2 {
		t.Fatalf("tasks = %v, %v", tasks, fails)
	}
	rs := c.CopyAll(ctx, tasks, nil)
	expectOK(t, rs, fails)
	if d, ok := digestAt(t, dst.Host+"/m/app:1"); !ok || d != idxDigest {
		t.Errorf("index at target: %v %v, want %v", d, ok, idxDigest)
	}
	if d, ok := digestAt(t, dst.Host+"/s/app:2"); !ok || d != imgDigest {
		t.Errorf("image at target: %v %v, want %v", d, ok, imgDigest)
	}
	// Every child manifest arrived too, so each platform pulls.
	im, _ := idx.IndexManifest()
	for _, m := range im.Manifests {
		if _, err := remote.Image(mustRef(t, dst.Host+"/m/app@"+m.Digest.String()), remote.WithPlatform(*m.Platform)); err != nil {
			t.Errorf("%s at target: %v", m.Platform, err)
		}
	}

	// --platform linux/amd64: only that platform's manifest arrives, with
	// its digest unchanged.
	plats, err := ParsePlatforms([]string{"linux/amd64"})
	if err != nil {
		t.Fatal(err)
	}
	cf := NewCopier(Options{Platforms: plats})
	rs = cf.CopyAll(ctx, []Task{{Source: src.Host + "/multi/app:1", Target: dst.Host + "/amd/app:1"}}, nil)
	expectOK(t, rs, nil)
	got, err := remote.Index(mustRef(t, dst.Host+"/amd/app:1"))
	if err != nil {
		t.Fatal(err)
	}
	gim, _ := got.IndexManifest()
	if len(gim.Manifests) != 1 || gim.Manifests[0].Platform.String() != "linux/amd64" {
		t.Fatalf("filtered index holds %+v", gim.Manifests)
	}
	for _, m := range im.Manifests {
		_, present := digestAt(t, dst.Host+"/amd/app@"+m.Digest.String())
		if want := m.Platform.String() == "linux/amd64"; present != want {
			t.Errorf("%s (%s) present at target: %v, want %v", m.Platform, m.Digest, present, want)
		}
		if m.Platform.String() == "linux/amd64" && gim.Manifests[0].Digest != m.Digest {
			t.Errorf("amd64 manifest digest changed: %s != %s", gim.Manifests[0].Digest, m.Digest)
		}
	}
	if rs[0].Platforms[0] != "linux/amd64" || len(rs[0].Platforms) != 1 {
		t.Errorf("result platforms %v", rs[0].Platforms)
	}
	// A platform the index lacks is a clear error.
	plats, _ = ParsePlatforms([]string{"windows/amd64"})
	rs = NewCopier(Options{Platforms: plats}).CopyAll(ctx, []Task{{Source: src.Host + "/multi/app:1", Target: dst.Host + "/win/app:1"}}, nil)
	if rs[0].Outcome != Failed || !strings.Contains(rs[0].Error, "windows/amd64") || !strings.Contains(rs[0].Error, src.Host+"/multi/app:1") {
		t.Errorf("missing platform: %+v", rs[0])
	}
}

func TestCopyIncremental(t *testing.T) {
	ctx := context.Background()
	src, dst := startRegistry(t, testenv.RegistryOptions{}), startRegistry(t, testenv.RegistryOptions{})
	var tasks []Task
	var layerBytes int64
	for _, n := range []string{"a", "b", "c"} {
		img := pushImage(t, src, "inc/"+n+":1", 256<<10, 3)
		ls, _ := img.Layers()
		for _, l := range ls {
			s, _ := l.Size()
			layerBytes += s
		}
		tasks = append(tasks, Task{Source: src.Host + "/inc/" + n + ":1", Target: dst.Host + "/inc/" + n + ":1"})
	}
	idx := pushIndex(t, src, "inc/multi:1", "linux/amd64", "linux/arm64")
	tasks = append(tasks, Task{Source: src.Host + "/inc/multi:1", Target: dst.Host + "/inc/multi:1"})
	_ = idx

	c := NewCopier(Options{})
	first := c.CopyAll(ctx, tasks, nil)
	expectOK(t, first, nil)
	var sent int64
	for _, r := range first {
		if r.Outcome != Copied {
			t.Errorf("first sync %s: %s", r.Source, r.Outcome)
		}
		sent += r.BlobBytes
	}
	if sent < layerBytes {
		t.Errorf("first sync sent %d blob bytes, less than the %d layer bytes", sent, layerBytes)
	}
	second := c.CopyAll(ctx, tasks, nil)
	expectOK(t, second, nil)
	var again int64
	for _, r := range second {
		if r.Outcome != Present {
			t.Errorf("second sync %s: %s, want present", r.Source, r.Outcome)
		}
		again += r.BlobBytes
	}
	if again != 0 {
		t.Errorf("second sync sent %d blob bytes, want 0", again)
	}
	// The same images under new tags: the manifests are written, no blob is re-sent.
	var retag []Task
	for _, tk := range tasks {
		retag = append(retag, Task{Source: tk.Source, Target: strings.TrimSuffix(tk.Target, ":1") + ":copy"})
	}
	third := c.CopyAll(ctx, retag, nil)
	expectOK(t, third, nil)
	for _, r := range third {
		if r.Outcome != Copied || r.BlobBytes != 0 {
			t.Errorf("retag %s: %s with %d blob bytes, want copied with 0", r.Target, r.Outcome, r.BlobBytes)
		}
	}
	t.Logf("first sync: %d blob bytes; second sync: %d; retag: 0", sent, again)
}

// basicKeychain answers every registry with one user and password.
type basicKeychain struct{ user, password string }

func (k basicKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return &authn.Basic{Username: k.user, Password: k.password}, nil
}

func TestCopyBadInput(t *testing.T) {
	ctx := context.Background()
	src, dst := startRegistry(t, testenv.RegistryOptions{}), startRegistry(t, testenv.RegistryOptions{})
	locked := startRegistry(t, testenv.RegistryOptions{User: "ferry", Password: "right"})
	good := pushImage(t, src, "ok/app:1", 2048, 1)
	goodDigest, _ := good.Digest()
	// A manifest whose stored bytes no longer hash to its digest.
	bad := pushImage(t, src, "tampered/app:1", 2048, 1)
	badDigest, _ := bad.Digest()
	raw, _ := bad.RawManifest()
	if err := os.WriteFile(src.BlobPath(badDigest.Hex), append(raw, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	// An image behind auth, pushed with the right password.
	lockedImg, _ := random.Image(2048, 1)
	if err := remote.Write(mustRef(t, locked.Host+"/private/app:1"), lockedImg, remote.WithAuth(&authn.Basic{Username: "ferry", Password: "right"})); err != nil {
		t.Fatal(err)
	}
	unreachable := "127.0.0.1:1"

	c := NewCopier(Options{Keychain: basicKeychain{"ferry", "wrong"}, Retry: RetryPolicy{Attempts: 2, Initial: 10e6, Max: 10e6}})
	tasks := []Task{
		{Source: unreachable + "/gone/app:1", Target: dst.Host + "/gone/app:1"},
		{Source: locked.Host + "/private/app:1", Target: dst.Host + "/private/app:1"},
		{Source: src.Host + "/tampered/app:1", Target: dst.Host + "/tampered/app:1"},
		{Source: src.Host + "/tampered/app@" + badDigest.String(), Target: dst.Host + "/tampered/app"},
		{Source: src.Host + "/Bad Name:1", Target: dst.Host + "/bad/app:1"},
		{Source: src.Host + "/ok/app:1", Target: dst.Host + "/ok/app:1"},
	}
	tasks[3].Target += "@" + badDigest.String()
	rs := c.CopyAll(ctx, tasks, nil)
	wants := []string{"source registry unreachable", "access denied", "digest", "digest", "malformed reference", ""}
	for i, r := range rs {
		t.Logf("%s: %s %s", r.Source, r.Outcome, r.Error)
		if wants[i] == "" {
			if r.Outcome != Copied {
				t.Errorf("good image: %s %s", r.Outcome, r.Error)
			}
			continue
		}
		if r.Outcome != Failed || !strings.Contains(r.Error, wants[i]) || !strings.Contains(r.Error, tasks[i].Source) {
			t.Errorf("%s: outcome %s, error %q; want failed with %q naming the image", tasks[i].Source, r.Outcome, r.Error, wants[i])
		}
	}
	if d, ok := digestAt(t, dst.Host+"/ok/app:1"); !ok || d != goodDigest {
		t.Errorf("the good image did not arrive: %v %v", d, ok)
	}
	if _, ok := digestAt(t, dst.Host+"/tampered/app:1"); ok {
		t.Error("the tampered image arrived")
	}
}

// TestCopyMountsSharedLayers: a layer already written to one repository
// of the target registry is mounted into the next one, not sent again.
func TestCopyMountsSharedLayers(t *testing.T) {
	ctx := context.Background()
	src, dst := startRegistry(t, testenv.RegistryOptions{}), startRegistry(t, testenv.RegistryOptions{})
	base, err := random.Layer(1<<20, types.DockerLayer)
	if err != nil {
		t.Fatal(err)
	}
	baseSize, _ := base.Size()
	var tasks []Task
	for _, n := range []string{"a", "b"} {
		own, _ := random.Layer(1024, types.DockerLayer)
		img, err := mutate.AppendLayers(empty.Image, base, own)
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Push("mnt/"+n+":1", img); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, Task{Source: src.Host + "/mnt/" + n + ":1", Target: dst.Host + "/mnt/" + n + ":1"})
	}
	rs := NewCopier(Options{Concurrency: 1}).CopyAll(ctx, tasks, nil)
	expectOK(t, rs, nil)
	if rs[0].BlobBytes < baseSize {
		t.Errorf("first image sent %d blob bytes, less than its base layer (%d)", rs[0].BlobBytes, baseSize)
	}
	if rs[1].BlobBytes >= baseSize {
		t.Errorf("second image sent %d blob bytes: its base layer (%d bytes) was sent again, not mounted", rs[1].BlobBytes, baseSize)
	}
	if _, err := remote.Image(mustRef(t, dst.Host+"/mnt/b:1")); err != nil {
		t.Fatal(err)
	}
	t.Logf("first image sent %d bytes, second (base layer mounted) %d", rs[0].BlobBytes, rs[1].BlobBytes)
}
