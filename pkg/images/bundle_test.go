package images

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeferry/ferry/pkg/store"
)

// TestBundleRoundTrip bundles two images into an in-memory store, twice
// (the second adds no blob), pushes them to another registry, and refuses
// a damaged or missing blob, naming the image.
func TestBundleRoundTrip(t *testing.T) {
	ctx := context.Background()
	srcSrv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srcSrv.Close()
	dstSrv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer dstSrv.Close()
	src, dst := strings.TrimPrefix(srcSrv.URL, "http://"), strings.TrimPrefix(dstSrv.URL, "http://")
	loc, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	for _, n := range []string{"a", "b"} {
		img, _ := random.Image(4096, 2)
		if err := remote.Write(mustRef(t, src+"/shop/"+n+":1"), img); err != nil {
			t.Fatal(err)
		}
	}
	newRecord := func() *Record {
		c := NewCollector()
		c.Add(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"namespace": "x", "name": "d"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "a", "image": src + "/shop/a:1"}, map[string]any{"name": "b", "image": src + "/shop/b:1"}}}}}})
		return c.Record(ModeBundle)
	}
	c := NewCopier(Options{})
	b1 := NewBundle(loc)
	rec := newRecord()
	c.BundleRecord(ctx, rec, b1)
	for _, ir := range rec.Images {
		if !ir.Bundled || ir.Error != "" {
			t.Fatalf("%s: bundled %v, error %s", ir.Reference, ir.Bundled, ir.Error)
		}
	}
	// 2 images x (2 layers + config + manifest).
	if st := b1.Stats(); st.BlobsWritten != 8 || st.BlobsReused != 0 {
		t.Errorf("first bundle: %+v, want 8 blobs written", st)
	}
	b2 := NewBundle(loc)
	c.BundleRecord(ctx, newRecord(), b2)
	if st := b2.Stats(); st.BlobsWritten != 0 || st.BlobsReused != 8 {
		t.Errorf("second bundle: %+v, want 0 written, 8 reused", st)
	}

	ms, _ := ParseMappings([]string{src + "/shop=" + dst + "/mirror"})
	rw := NewRewriter(ms, rec.Digests())
	rs := c.PushBundled(ctx, rec, NewBundle(loc), rw)
	for i, r := range rs {
		if r.Outcome != Copied || r.Digest != rec.Images[i].Digest {
			t.Fatalf("push %s: %+v", r.Source, r)
		}
		if d, err := remote.Head(mustRef(t, dst+"/mirror/"+[]string{"a", "b"}[i]+"@"+r.Digest)); err != nil || d.Digest.String() != r.Digest {
			t.Errorf("%s not at the target by digest: %v", r.Source, err)
		}
	}

	// Damage one layer of image a; remove the config of image b.
	img, _ := NewBundle(loc).Image(ctx, mustHash(t, rec.Images[0].Digest))
	ls, _ := img.Layers()
	ld, _ := ls[0].Digest()
	if err := loc.Bucket().WriteAll(ctx, store.ImageBlobKey("sha256", ld.Hex), []byte("not the layer"), nil); err != nil {
		t.Fatal(err)
	}
	imgB, _ := NewBundle(loc).Image(ctx, mustHash(t, rec.Images[1].Digest))
	m, _ := imgB.Manifest()
	if err := loc.Bucket().Delete(ctx, store.ImageBlobKey("sha256", m.Config.Digest.Hex)); err != nil {
		t.Fatal(err)
	}
	// A registry that has none of the blobs, so every one is read.
	freshSrv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer freshSrv.Close()
	ms2, _ := ParseMappings([]string{src + "/shop=" + strings.TrimPrefix(freshSrv.URL, "http://") + "/other"})
	rs = c.PushBundled(ctx, rec, NewBundle(loc), NewRewriter(ms2, nil))
	for i, want := range []string{"is damaged", "is missing from the store"} {
		if rs[i].Outcome != Failed || !strings.Contains(rs[i].Error, want) || !strings.Contains(rs[i].Error, rec.Images[i].Reference) {
			t.Errorf("push %s: %s %q, want failed with %q naming the image", rs[i].Source, rs[i].Outcome, rs[i].Error, want)
		}
	}
}

func mustHash(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
