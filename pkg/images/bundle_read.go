package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeferry/ferry/pkg/store"
)

// readBlob reads a whole blob (a manifest or config) and checks its digest.
func (b *Bundle) readBlob(ctx context.Context, h v1.Hash) ([]byte, error) {
	rc, err := b.open(ctx, h)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// open streams blob h, failing at the end if it does not hash to h.
func (b *Bundle) open(ctx context.Context, h v1.Hash) (io.ReadCloser, error) {
	key, err := blobKey(h)
	if err != nil {
		return nil, err
	}
	r, err := b.loc.NewReader(ctx, key)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("image blob %s is missing from the store (%s)", h, key)
		}
		return nil, err
	}
	return &verifyReader{rc: r, want: h, key: key, sum: sha256.New()}, nil
}

type verifyReader struct {
	rc   io.ReadCloser
	want v1.Hash
	key  string
	sum  hash.Hash
}

func (v *verifyReader) Read(p []byte) (int, error) {
	n, err := v.rc.Read(p)
	v.sum.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.sum.Sum(nil)); got != v.want.Hex {
			return n, fmt.Errorf("image blob %s in the store (%s) is damaged: its content hashes to sha256:%s", v.want, v.key, got)
		}
	}
	return n, err
}

func (v *verifyReader) Close() error { return v.rc.Close() }

// Image opens the image whose manifest is blob h from the store.
func (b *Bundle) Image(ctx context.Context, h v1.Hash) (v1.Image, error) {
	raw, err := b.readBlob(ctx, h)
	if err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", h, err)
	}
	mt := m.MediaType
	if mt == "" {
		mt = types.OCIManifestSchema1
	}
	return partial.CompressedToImage(&storeImage{b: b, ctx: ctx, raw: raw, m: m, mt: mt})
}

// Index opens the image index whose manifest is blob h from the store.
func (b *Bundle) Index(ctx context.Context, h v1.Hash) (v1.ImageIndex, error) {
	raw, err := b.readBlob(ctx, h)
	if err != nil {
		return nil, err
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", h, err)
	}
	mt := im.MediaType
	if mt == "" {
		mt = types.OCIImageIndex
	}
	return &storeIndex{b: b, ctx: ctx, raw: raw, im: im, mt: mt, digest: h}, nil
}

type storeImage struct {
	b   *Bundle
	ctx context.Context
	raw []byte
	m   *v1.Manifest
	mt  types.MediaType
}

func (s *storeImage) RawConfigFile() ([]byte, error)      { return s.b.readBlob(s.ctx, s.m.Config.Digest) }
func (s *storeImage) MediaType() (types.MediaType, error) { return s.mt, nil }
func (s *storeImage) RawManifest() ([]byte, error)        { return s.raw, nil }
func (s *storeImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if h == s.m.Config.Digest {
		return &storeLayer{b: s.b, ctx: s.ctx, desc: s.m.Config}, nil
	}
	for _, l := range s.m.Layers {
		if l.Digest == h {
			return &storeLayer{b: s.b, ctx: s.ctx, desc: l}, nil
		}
	}
	return nil, fmt.Errorf("manifest has no blob %s", h)
}

type storeLayer struct {
	b    *Bundle
	ctx  context.Context
	desc v1.Descriptor
}

func (l *storeLayer) Digest() (v1.Hash, error)            { return l.desc.Digest, nil }
func (l *storeLayer) Size() (int64, error)                { return l.desc.Size, nil }
func (l *storeLayer) MediaType() (types.MediaType, error) { return l.desc.MediaType, nil }
func (l *storeLayer) Compressed() (io.ReadCloser, error)  { return l.b.open(l.ctx, l.desc.Digest) }

type storeIndex struct {
	b      *Bundle
	ctx    context.Context
	raw    []byte
	im     *v1.IndexManifest
	mt     types.MediaType
	digest v1.Hash
}

func (s *storeIndex) MediaType() (types.MediaType, error)       { return s.mt, nil }
func (s *storeIndex) Digest() (v1.Hash, error)                  { return s.digest, nil }
func (s *storeIndex) Size() (int64, error)                      { return int64(len(s.raw)), nil }
func (s *storeIndex) IndexManifest() (*v1.IndexManifest, error) { return s.im, nil }
func (s *storeIndex) RawManifest() ([]byte, error)              { return s.raw, nil }
func (s *storeIndex) Image(h v1.Hash) (v1.Image, error)         { return s.b.Image(s.ctx, h) }
func (s *storeIndex) ImageIndex(h v1.Hash) (v1.ImageIndex, error) {
	return s.b.Index(s.ctx, h)
}

// Verify reads every blob of every bundled image of rec from the store
// (manifests, configs, layers; each once) and checks it against its
// digest. It returns the blobs and bytes read; the error names the image
// and the blob.
func (b *Bundle) Verify(ctx context.Context, rec *Record) (blobs int, size int64, err error) {
	seen := map[v1.Hash]bool{}
	read := func(h v1.Hash) error {
		if seen[h] {
			return nil
		}
		rc, err := b.open(ctx, h)
		if err != nil {
			return err
		}
		defer rc.Close()
		n, err := io.Copy(io.Discard, rc)
		if err != nil {
			return err
		}
		seen[h] = true
		blobs++
		size += n
		return nil
	}
	var walk func(h v1.Hash, index bool) error
	walk = func(h v1.Hash, index bool) error {
		if seen[h] {
			return nil
		}
		raw, err := b.readBlob(ctx, h)
		if err != nil {
			return err
		}
		seen[h] = true
		blobs++
		size += int64(len(raw))
		if index {
			im, err := v1.ParseIndexManifest(bytes.NewReader(raw))
			if err != nil {
				return fmt.Errorf("index %s: %w", h, err)
			}
			for _, m := range im.Manifests {
				if err := walk(m.Digest, m.MediaType.IsIndex()); err != nil {
					return err
				}
			}
			return nil
		}
		m, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("manifest %s: %w", h, err)
		}
		if err := read(m.Config.Digest); err != nil {
			return err
		}
		for _, l := range m.Layers {
			if err := read(l.Digest); err != nil {
				return err
			}
		}
		return nil
	}
	for _, ir := range rec.Images {
		if !ir.Bundled {
			continue
		}
		h, err := v1.NewHash(ir.Digest)
		if err != nil {
			return blobs, size, fmt.Errorf("image %s: recorded digest %q: %w", ir.Reference, ir.Digest, err)
		}
		if err := walk(h, isIndex(ir.MediaType)); err != nil {
			return blobs, size, fmt.Errorf("image %s: %w", ir.Reference, err)
		}
		for _, r := range ir.Referrers {
			rh, err := v1.NewHash(r.Digest)
			if err != nil {
				return blobs, size, fmt.Errorf("image %s: referrer %q: %w", ir.Reference, r.Digest, err)
			}
			if err := walk(rh, isIndex(r.MediaType)); err != nil {
				return blobs, size, fmt.Errorf("image %s: referrer %s (%s): %w", ir.Reference, r.Digest, orType(r.ArtifactType), err)
			}
		}
	}
	return blobs, size, nil
}
