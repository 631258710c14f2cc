package images

import (
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// mounts remembers, per target registry, a repository each blob was
// written to in this process, so that the next repository of the same
// registry that needs the blob mounts it (OCI distribution spec,
// "Mounting a blob from another repository": POST
// /v2/<name>/blobs/uploads/?mount=<digest>&from=<other>) instead of
// uploading it again. go-containerregistry's remote.Write mounts a
// remote.MountableLayer whose Reference is in the target's registry.
type mounts struct {
	m sync.Map // registry + " " + digest -> name.Repository
}

func (ms *mounts) remember(repo name.Repository, digests []v1.Hash) {
	for _, d := range digests {
		ms.m.LoadOrStore(repo.RegistryStr()+" "+d.String(), repo)
	}
}

// from returns a repository of registry that has blob d, other than repo.
func (ms *mounts) from(repo name.Repository, d v1.Hash) (name.Repository, bool) {
	v, ok := ms.m.Load(repo.RegistryStr() + " " + d.String())
	if !ok {
		return name.Repository{}, false
	}
	r := v.(name.Repository)
	return r, r.Name() != repo.Name()
}

// blobDigests lists the layer and config digests of img.
func blobDigests(img v1.Image) []v1.Hash {
	m, err := img.Manifest()
	if err != nil {
		return nil
	}
	out := []v1.Hash{m.Config.Digest}
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out
}

// mountImage wraps the layers of an image in remote.MountableLayer when
// another repository of the target registry has them.
type mountImage struct {
	v1.Image
	ms  *mounts
	dst name.Repository
	// config, when set, is the image's raw config, already read (and
	// checked against its digest) from the source.
	config []byte
}

func (mi *mountImage) wrap(l v1.Layer) v1.Layer {
	d, err := l.Digest()
	if err != nil {
		return l
	}
	if from, ok := mi.ms.from(mi.dst, d); ok {
		return &remote.MountableLayer{Layer: l, Reference: from.Tag("mount")}
	}
	return l
}

func (mi *mountImage) Layers() ([]v1.Layer, error) {
	ls, err := mi.Image.Layers()
	if err != nil {
		return nil, err
	}
	out := make([]v1.Layer, len(ls))
	for i, l := range ls {
		out[i] = mi.wrap(l)
	}
	return out, nil
}

func (mi *mountImage) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	l, err := mi.Image.LayerByDigest(h)
	if err != nil {
		return nil, err
	}
	return mi.wrap(l), nil
}

// Descriptor keeps the source's descriptor (partial.Descriptor).
func (mi *mountImage) Descriptor() (*v1.Descriptor, error) { return partial.Descriptor(mi.Image) }

// ConfigLayer keeps the config mountable too (partial.ConfigLayer).
// A config already read goes up from memory: go-containerregistry's
// remote image would fetch it from the source a second time.
func (mi *mountImage) ConfigLayer() (v1.Layer, error) {
	if mi.config != nil {
		m, err := mi.Image.Manifest()
		if err != nil {
			return nil, err
		}
		return mi.wrap(static.NewLayer(mi.config, m.Config.MediaType)), nil
	}
	l, err := partial.ConfigLayer(mi.Image)
	if err != nil {
		return nil, err
	}
	return mi.wrap(l), nil
}

// mountIndex hands out mountImages. (v1.ImageIndex cannot be embedded:
// its method ImageIndex would clash with the field's name.)
type mountIndex struct {
	inner v1.ImageIndex
	ms    *mounts
	dst   name.Repository
}

func (mx *mountIndex) MediaType() (types.MediaType, error)       { return mx.inner.MediaType() }
func (mx *mountIndex) Digest() (v1.Hash, error)                  { return mx.inner.Digest() }
func (mx *mountIndex) Size() (int64, error)                      { return mx.inner.Size() }
func (mx *mountIndex) IndexManifest() (*v1.IndexManifest, error) { return mx.inner.IndexManifest() }
func (mx *mountIndex) RawManifest() ([]byte, error)              { return mx.inner.RawManifest() }

func (mx *mountIndex) Image(h v1.Hash) (v1.Image, error) {
	img, err := mx.inner.Image(h)
	if err != nil {
		return nil, err
	}
	return &mountImage{Image: img, ms: mx.ms, dst: mx.dst}, nil
}

func (mx *mountIndex) ImageIndex(h v1.Hash) (v1.ImageIndex, error) {
	idx, err := mx.inner.ImageIndex(h)
	if err != nil {
		return nil, err
	}
	return &mountIndex{inner: idx, ms: mx.ms, dst: mx.dst}, nil
}

// Descriptor keeps the source's descriptor (partial.Descriptor).
func (mx *mountIndex) Descriptor() (*v1.Descriptor, error) { return partial.Descriptor(mx.inner) }

// rememberAll records every blob of it as present in repo.
func (ms *mounts) rememberAll(repo name.Repository, it *item) {
	if it.img != nil {
		ms.remember(repo, blobDigests(it.img))
		return
	}
	im, err := it.idx.IndexManifest()
	if err != nil {
		return
	}
	for _, m := range im.Manifests {
		if img, err := it.idx.Image(m.Digest); err == nil && m.MediaType.IsImage() {
			ms.remember(repo, blobDigests(img))
		}
	}
}
