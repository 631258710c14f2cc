package preflight

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeferry/ferry/pkg/images"
)

// Bounds of the image pull-rate probe: one blob, read for at most
// pullProbeTime or pullProbeBytes.
const (
	pullProbeTime  = 5 * time.Second
	pullProbeBytes = 64 << 20
)

// imageBytes is what a migration that copies images (spec.images copy or
// bundle) moves: the unique blobs of the images it copies, and the
// largest, for the pull-rate probe.
type imageBytes struct {
	mu      sync.Mutex
	images  int
	blobs   map[v1.Hash]int64
	largest struct {
		ref  name.Digest
		size int64
	}
}

func (b *imageBytes) total() int64 {
	var n int64
	for _, s := range b.blobs {
		n += s
	}
	return n
}

// sourceRef is the source reference of ref, which the dry run wrote
// after the registry mappings: the mappings reversed. A pinned digest is
// the copy's (a copy of some platforms is a new index), so a reference
// with a tag is resolved by its tag.
func (e *env) sourceRef(ref string) string {
	var rev []string
	for _, m := range e.o.Restore.Spec.ImageRegistryMappings {
		for _, s := range strings.Split(m, ",") {
			if from, to, ok := strings.Cut(strings.TrimSpace(s), "="); ok {
				rev = append(rev, to+"="+from)
			}
		}
	}
	ms, err := images.ParseMappings(rev)
	if err != nil || len(ms) == 0 {
		return ref
	}
	out, changed, err := images.NewRewriter(ms, nil).Rewrite(ref)
	if err != nil || !changed {
		return ref
	}
	if tag, digest := images.SplitTagDigest(out); tag != "" && digest != "" {
		out = strings.TrimSuffix(out, "@"+digest)
	}
	return out
}

// add adds the blobs of the image desc describes, at r (of each of its
// manifests, for an index), to b.
func (b *imageBytes) add(r name.Reference, desc *remote.Descriptor) error {
	var imgs []v1.Image
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return err
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return err
		}
		for _, d := range m.Manifests {
			if img, err := idx.Image(d.Digest); err == nil {
				imgs = append(imgs, img)
			}
		}
	} else {
		img, err := desc.Image()
		if err != nil {
			return err
		}
		imgs = append(imgs, img)
	}
	var ms []*v1.Manifest
	for _, img := range imgs {
		m, err := img.Manifest()
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.images++
	for _, m := range ms {
		b.blobs[m.Config.Digest] = m.Config.Size
		for _, l := range m.Layers {
			b.blobs[l.Digest] = l.Size
			if l.Size > b.largest.size {
				b.largest.size = l.Size
				b.largest.ref = r.Context().Digest(l.Digest.String())
			}
		}
	}
	return nil
}

// probePullRate reads the largest blob from its registry, for at most
// pullProbeTime or pullProbeBytes, and returns the bytes per second.
func probePullRate(ctx context.Context, b *imageBytes, opts images.Options) (float64, int64, error) {
	if b.largest.size == 0 {
		return 0, 0, fmt.Errorf("no blob to read")
	}
	ctx, cancel := context.WithTimeout(ctx, pullProbeTime)
	defer cancel()
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain // as the image check's
	}
	ro := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if opts.Transport != nil {
		ro = append(ro, remote.WithTransport(opts.Transport))
	}
	start := time.Now()
	l, err := remote.Layer(b.largest.ref, ro...)
	if err != nil {
		return 0, 0, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return 0, 0, err
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(rc, pullProbeBytes))
	if err != nil && ctx.Err() == nil {
		return 0, n, err
	}
	took := time.Since(start)
	if n == 0 {
		return 0, 0, fmt.Errorf("blob %s: nothing read within %s", b.largest.ref, pullProbeTime)
	}
	return float64(n) / max(took.Seconds(), 0.001), n, nil
}
