package images

import (
	"context"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeferry/ferry/internal/testenv"
)

// TestPlatformFilterNestedReferrers: a platform filter that keeps part of
// a nested index makes a new one, and the referrers of the old one would
// be left behind: the copy is refused, naming them. A nested index the
// filter drops whole takes its referrers with it (its platforms were not
// asked for), and one kept whole keeps its digest and its referrers.
func TestPlatformFilterNestedReferrers(t *testing.T) {
	src := startRegistry(t, testenv.RegistryOptions{})
	dst := startRegistry(t, testenv.RegistryOptions{})
	nested := func(plats ...string) v1.ImageIndex {
		var adds []mutate.IndexAddendum
		for _, p := range plats {
			img, err := random.Image(512, 1)
			if err != nil {
				t.Fatal(err)
			}
			pl, _ := v1.ParsePlatform(p)
			adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: pl}})
		}
		return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	}
	two, one := nested("linux/amd64", "linux/arm64"), nested("linux/s390x")
	outer := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: two}, mutate.IndexAddendum{Add: one}), types.OCIImageIndex)
	if err := remote.WriteIndex(mustRef(t, src.Host+"/n/app:1"), outer); err != nil {
		t.Fatal(err)
	}
	attach := func(idx v1.ImageIndex) string {
		d, _ := idx.Digest()
		subject, err := src.Descriptor("n/app@" + d.String())
		if err != nil {
			t.Fatal(err)
		}
		h, err := src.AttachReferrer("n/app", subject, "application/spdx+json", []byte(`{"sbom":"`+d.String()+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	onTwo, onOne := attach(two), attach(one)
	ctx := context.Background()
	copyPlatform := func(p, to string) Result {
		plats, err := ParsePlatforms([]string{p})
		if err != nil {
			t.Fatal(err)
		}
		return NewCopier(Options{Platforms: plats}).Copy(ctx, Task{Source: src.Host + "/n/app:1", Target: dst.Host + "/" + to + ":1"})
	}

	r := copyPlatform("linux/arm64", "arm")
	twoDigest, _ := two.Digest()
	if r.Outcome != Failed || !strings.Contains(r.Error, twoDigest.String()) || !strings.Contains(r.Error, onTwo) {
		t.Errorf("arm64 of the two-platform nested index: %s %q; want refused, naming %s and its referrer %s", r.Outcome, r.Error, twoDigest, onTwo)
	}
	t.Logf("refused: %s", r.Error)
	if _, there := digestAt(t, dst.Host+"/arm:1"); there {
		t.Errorf("the refused copy wrote its index")
	}

	r = copyPlatform("linux/s390x", "s390x")
	if r.Outcome != Copied {
		t.Fatalf("s390x: %s %q", r.Outcome, r.Error)
	}
	var got []string
	for _, ref := range r.Referrers {
		got = append(got, ref.Digest)
	}
	if len(got) != 1 || got[0] != onOne {
		t.Errorf("s390x: referrers %v, want only %s (the nested index kept whole); %s left with its platforms", got, onOne, onTwo)
	}
}
