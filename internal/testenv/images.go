package testenv

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// remoteOptions authenticate as the registry's user, if any.
func (r *Registry) remoteOptions() []remote.Option {
	if r.User == "" {
		return nil
	}
	return []remote.Option{remote.WithAuth(&authn.Basic{Username: r.User, Password: r.Password})}
}

// PushImage pushes a random image (go-containerregistry's random.Image:
// layers tar layers of one file of size random bytes each, an empty
// config) to repoTag, a reference relative to the registry ("shop/web:1").
// It returns the image pushed.
func (r *Registry) PushImage(repoTag string, size int64, layers int) (v1.Image, error) {
	img, err := random.Image(size, int64(layers))
	if err != nil {
		return nil, err
	}
	return img, r.Push(repoTag, img)
}

// Push pushes img to repoTag, relative to the registry.
func (r *Registry) Push(repoTag string, img v1.Image) error {
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		return fmt.Errorf("testenv: push %s: %w", repoTag, err)
	}
	if err := remote.Write(ref, img, r.remoteOptions()...); err != nil {
		return fmt.Errorf("testenv: push %s: %w", ref, err)
	}
	return nil
}

// PushIndex pushes an image index holding one random image (2 layers of
// 1 KiB) per platform ("linux/amd64", "linux/arm64/v8") to repoTag,
// relative to the registry, and returns it.
func (r *Registry) PushIndex(repoTag string, platforms ...string) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		img, err := random.Image(1024, 2)
		if err != nil {
			return nil, err
		}
		pl, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: pl}})
	}
	idx := mutate.AppendManifests(empty.Index, adds...)
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		return nil, fmt.Errorf("testenv: push %s: %w", repoTag, err)
	}
	if err := remote.WriteIndex(ref, idx, r.remoteOptions()...); err != nil {
		return nil, fmt.Errorf("testenv: push %s: %w", ref, err)
	}
	return idx, nil
}

// Digest returns the digest the registry has for ref (relative to the
// registry), or false when it has none.
func (r *Registry) Digest(repoRef string) (v1.Hash, bool) {
	ref, err := name.ParseReference(r.Host + "/" + repoRef)
	if err != nil {
		return v1.Hash{}, false
	}
	d, err := remote.Head(ref, r.remoteOptions()...)
	if err != nil {
		return v1.Hash{}, false
	}
	return d.Digest, true
}

// parse parses repoRef relative to the registry.
func (r *Registry) parse(repoRef string) (name.Reference, error) {
	ref, err := name.ParseReference(r.Host + "/" + repoRef)
	if err != nil {
		return nil, fmt.Errorf("testenv: %s: %w", repoRef, err)
	}
	return ref, nil
}
