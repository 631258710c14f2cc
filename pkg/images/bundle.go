package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeferry/ferry/pkg/store"
)

// RefNameAnnotation names a manifest's reference in an OCI image index
// (OCI image spec, annotations: org.opencontainers.image.ref.name).
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// Bundle is the image layout in a backup storage location, shared by all
// backups (OCI image layout spec): every blob (manifest, config, layer)
// at images/blobs/sha256/<hex>, written once, and an image index per
// backup (store.BackupImageIndexKey) naming its images. Every blob is
// checked against its digest as it is written and as it is read.
type Bundle struct {
	loc *store.Location
	// once per blob per process, so concurrent images sharing a layer
	// write it once.
	mu      sync.Mutex
	pending map[string]*blobWrite

	written, reused, bytes atomic.Int64
}

type blobWrite struct {
	done chan struct{}
	err  error
}

// BundleStats counts the blobs a bundle wrote and those it found already
// in the store, and the bytes it wrote.
type BundleStats struct {
	BlobsWritten int64 `json:"blobsWritten"`
	BlobsReused  int64 `json:"blobsReused"`
	BytesWritten int64 `json:"bytesWritten"`
}

// NewBundle returns the bundle of loc.
func NewBundle(loc *store.Location) *Bundle {
	return &Bundle{loc: loc, pending: map[string]*blobWrite{}}
}

// Stats returns the counts so far.
func (b *Bundle) Stats() BundleStats {
	return BundleStats{BlobsWritten: b.written.Load(), BlobsReused: b.reused.Load(), BytesWritten: b.bytes.Load()}
}

func blobKey(h v1.Hash) (string, error) {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 {
		return "", fmt.Errorf("digest %s: only sha256 is supported", h)
	}
	if _, err := hex.DecodeString(h.Hex); err != nil {
		return "", fmt.Errorf("digest %s: %w", h, err)
	}
	return store.ImageBlobKey(h.Algorithm, h.Hex), nil
}

// putBlob stores blob h unless the store has it, streaming it from open
// and checking its digest; a mismatch stores nothing.
func (b *Bundle) putBlob(ctx context.Context, h v1.Hash, open func() (io.ReadCloser, error)) error {
	key, err := blobKey(h)
	if err != nil {
		return err
	}
	b.mu.Lock()
	if w, ok := b.pending[key]; ok {
		b.mu.Unlock()
		<-w.done
		return w.err
	}
	w := &blobWrite{done: make(chan struct{})}
	b.pending[key] = w
	b.mu.Unlock()
	w.err = b.writeBlob(ctx, key, h, open)
	if w.err != nil {
		// A later image may try again.
		b.mu.Lock()
		delete(b.pending, key)
		b.mu.Unlock()
	}
	close(w.done)
	return w.err
}

func (b *Bundle) writeBlob(ctx context.Context, key string, h v1.Hash, open func() (io.ReadCloser, error)) error {
	if ok, err := b.loc.Exists(ctx, key); err != nil {
		return err
	} else if ok {
		b.reused.Add(1)
		return nil
	}
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.loc.NewWriter(wctx, key)
	if err != nil {
		return err
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, sum), rc)
	if err == nil && hex.EncodeToString(sum.Sum(nil)) != h.Hex {
		err = fmt.Errorf("blob %s: content hashes to sha256:%x", h, sum.Sum(nil))
	}
	if err != nil {
		cancel() // nothing appears at key
		_ = w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", key, err)
	}
	b.written.Add(1)
	b.bytes.Add(n)
	return nil
}

func (b *Bundle) putBytes(ctx context.Context, data []byte) (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		return v1.Hash{}, err
	}
	return h, b.putBlob(ctx, h, func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// WriteImage stores img: its layers, config and manifest.
func (b *Bundle) WriteImage(ctx context.Context, img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		if err := b.putBlob(ctx, d, l.Compressed); err != nil {
			return fmt.Errorf("layer %s: %w", d, err)
		}
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if _, err := b.putBytes(ctx, cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	_, err = b.putBytes(ctx, raw)
	return err
}

// WriteIndex stores idx: every image and index it holds, then itself.
func (b *Bundle) WriteIndex(ctx context.Context, idx v1.ImageIndex) error {
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, m := range im.Manifests {
		switch {
		case m.MediaType.IsIndex():
			child, err := idx.ImageIndex(m.Digest)
			if err != nil {
				return err
			}
			if err := b.WriteIndex(ctx, child); err != nil {
				return err
			}
		case m.MediaType.IsImage():
			child, err := idx.Image(m.Digest)
			if err != nil {
				return err
			}
			if err := b.WriteImage(ctx, child); err != nil {
				return fmt.Errorf("manifest %s: %w", m.Digest, err)
			}
		default:
			return fmt.Errorf("manifest %s: media type %s is neither an image nor an index", m.Digest, m.MediaType)
		}
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	_, err = b.putBytes(ctx, raw)
	return err
}

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

// WriteLayoutMarker writes images/oci-layout if it is missing.
func (b *Bundle) WriteLayoutMarker(ctx context.Context) error {
	if ok, err := b.loc.Exists(ctx, store.ImageLayoutKey); err != nil || ok {
		return err
	}
	return b.loc.PutJSON(ctx, store.ImageLayoutKey, map[string]string{"imageLayoutVersion": "1.0.0"})
}

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

// BackupIndex is the OCI image index of the images of rec that are
// bundled, each manifest annotated with its reference.
func BackupIndex(rec *Record) *v1.IndexManifest {
	im := &v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}}
	for _, ir := range rec.Images {
		if !ir.Bundled {
			continue
		}
		h, err := v1.NewHash(ir.Digest)
		if err != nil {
			continue
		}
		im.Manifests = append(im.Manifests, v1.Descriptor{MediaType: types.MediaType(ir.MediaType), Digest: h, Size: ir.Size, Annotations: map[string]string{RefNameAnnotation: ir.Reference}})
	}
	return im
}

// marshalIndex encodes an index manifest.
func marshalIndex(im *v1.IndexManifest) ([]byte, error) { return json.Marshal(im) }

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
	}
	return blobs, size, nil
}
