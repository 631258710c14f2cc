package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	v1 "github.com/google/go-containerregistry/pkg/v1"
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

// WriteLayoutMarker writes images/oci-layout if it is missing.
func (b *Bundle) WriteLayoutMarker(ctx context.Context) error {
	if ok, err := b.loc.Exists(ctx, store.ImageLayoutKey); err != nil || ok {
		return err
	}
	return b.loc.PutJSON(ctx, store.ImageLayoutKey, map[string]string{"imageLayoutVersion": "1.0.0"})
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
