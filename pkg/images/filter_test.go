package images

import (
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// platformIndex is an OCI index of one random image per platform, and the
// images by platform.
func platformIndex(t *testing.T, plats ...string) (v1.ImageIndex, map[string]v1.Image) {
	t.Helper()
	imgs := map[string]v1.Image{}
	var adds []mutate.IndexAddendum
	for _, p := range plats {
		img, err := random.Image(256, 1)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := v1.ParsePlatform(p)
		if err != nil {
			t.Fatal(err)
		}
		imgs[p] = img
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: pl}})
	}
	return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex), imgs
}

func digestOf(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// leaves returns "platform@digest" for every image under idx, depth first,
// and the number of nested indexes on the way.
func leaves(t *testing.T, idx v1.ImageIndex) ([]string, int) {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	nested := 0
	for _, m := range im.Manifests {
		if m.MediaType.IsIndex() {
			child, err := idx.ImageIndex(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			l, n := leaves(t, child)
			out, nested = append(out, l...), nested+n+1
			continue
		}
		out = append(out, m.Platform.String()+"@"+m.Digest.String())
	}
	return out, nested
}

// TestFilterNestedIndex: --platform descends into an index whose entries
// are themselves indexes (as `docker buildx imagetools create` makes from
// several multi-platform images), keeps the nested indexes that hold a
// wanted platform, filtered, drops the others, and keeps every wanted
// image's digest.
func TestFilterNestedIndex(t *testing.T) {
	inner, imgs := platformIndex(t, "linux/amd64", "linux/arm64")
	other, otherImgs := platformIndex(t, "linux/amd64")
	win, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The outer index: inner with no platform of its own (the common
	// case), other marked linux/amd64, and a windows image.
	outer := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: inner},
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: win, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "windows", Architecture: "amd64"}}})

	for _, tc := range []struct {
		platform string
		want     []string
		nested   int
	}{
		{"linux/arm64", []string{"linux/arm64@" + digestOf(t, imgs["linux/arm64"]).String()}, 1},
		{"linux/amd64", []string{"linux/amd64@" + digestOf(t, imgs["linux/amd64"]).String(), "linux/amd64@" + digestOf(t, otherImgs["linux/amd64"]).String()}, 2},
		{"windows/amd64", []string{"windows/amd64@" + digestOf(t, win).String()}, 0},
	} {
		plats, err := ParsePlatforms([]string{tc.platform})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := NewCopier(Options{Platforms: plats}).filter(outer)
		if err != nil {
			t.Errorf("--platform %s: %v", tc.platform, err)
			continue
		}
		l, n := leaves(t, got)
		if strings.Join(l, " ") != strings.Join(tc.want, " ") || n != tc.nested {
			t.Errorf("--platform %s: images %v in %d nested indexes, want %v in %d", tc.platform, l, n, tc.want, tc.nested)
		}
	}
	// The nested index that is all linux/amd64 is kept as it is.
	plats, _ := ParsePlatforms([]string{"linux/amd64"})
	got, _, _ := NewCopier(Options{Platforms: plats}).filter(outer)
	if im, err := got.IndexManifest(); err != nil || len(im.Manifests) != 2 || im.Manifests[1].Digest != digestOf(t, other) {
		t.Errorf("linux/amd64: the all-amd64 nested index changed: %+v, %v", im, err)
	}

	// A platform no image has: the error lists the platforms found, nested ones included.
	plats, _ = ParsePlatforms([]string{"linux/s390x"})
	_, _, err = NewCopier(Options{Platforms: plats}).filter(outer)
	if err == nil || !strings.Contains(err.Error(), "no manifest for platform linux/s390x (it has linux/amd64, linux/arm64, windows/amd64)") {
		t.Errorf("linux/s390x: error %v, want it to list the nested platforms", err)
	}
	// An index whose manifests name no platform says so, not "(it has )".
	bare, err := random.Index(64, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = NewCopier(Options{Platforms: plats}).filter(bare)
	if err == nil || strings.Contains(err.Error(), "it has )") || !strings.Contains(err.Error(), "none of its 2 manifests names a platform") {
		t.Errorf("index without platforms: error %v", err)
	}
}

// TestIndexPlatforms: the platforms of a result (and of `ferry image
// sync`'s output) are those of the images, nested indexes included.
func TestIndexPlatforms(t *testing.T) {
	inner, _ := platformIndex(t, "linux/amd64", "linux/arm64/v8")
	outer := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: inner})
	it, err := indexItem(outer)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(it.platforms, ","); got != "linux/amd64,linux/arm64/v8" {
		t.Errorf("platforms %q, want linux/amd64,linux/arm64/v8", got)
	}
}
