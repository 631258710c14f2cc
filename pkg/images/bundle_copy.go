package images

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// BundleRecord writes every image of rec into bundle (mode bundle),
// after c's platform filter, and records the stored digest. Blobs the
// store already has (from this or an earlier backup) are not fetched.
func (c *Copier) BundleRecord(ctx context.Context, rec *Record, bundle *Bundle) {
	c.each(ctx, rec, func(_ int, ir *ImageRecord) {
		var retries, sent atomic.Int64
		ref, err := ParseReference(ir.Reference, c.opts.Insecure)
		if err != nil {
			ir.Error = err.Error()
			return
		}
		var it *item
		err = c.again(ctx, &retries, func() error {
			desc, err := get(ref, c.remoteOptions(ctx, &retries, &sent))
			if err != nil {
				return err
			}
			if it, err = c.source(desc); err != nil {
				return err
			}
			if it.idx != nil {
				return bundle.WriteIndex(ctx, it.idx)
			}
			return bundle.WriteImage(ctx, it.img)
		})
		if err != nil {
			ir.Error = explain(ir.Reference, "source", err).Error()
			return
		}
		ir.Digest, ir.MediaType, ir.Size, ir.Platforms, ir.Bundled = it.digest.String(), it.mediaType, it.size, it.platforms, true
	})
}

// PushBundled pushes each bundled image of rec from bundle to the
// registry rw maps its reference to (a restore's spec.pushImages), keeping the
// tag; the digest is unchanged. An image no mapping matches is a failed
// Result naming it. Results are in rec's order.
func (c *Copier) PushBundled(ctx context.Context, rec *Record, bundle *Bundle, rw *Rewriter) []Result {
	var out []Result
	for _, ir := range rec.Images {
		if ir.Bundled {
			out = append(out, Result{Source: ir.Reference})
		}
	}
	sub := &Record{}
	for _, ir := range rec.Images {
		if ir.Bundled {
			sub.Images = append(sub.Images, ir)
		}
	}
	c.each(ctx, sub, func(i int, ir *ImageRecord) {
		out[i] = c.pushOne(ctx, ir, bundle, rw)
	})
	return out
}

func (c *Copier) pushOne(ctx context.Context, ir *ImageRecord, bundle *Bundle, rw *Rewriter) Result {
	start := time.Now()
	res := Result{Source: ir.Reference}
	var retries, sent atomic.Int64
	err := c.again(ctx, &retries, func() error {
		target, changed, err := rw.Rewrite(ir.Reference)
		if err != nil {
			return err
		}
		if !changed {
			return fmt.Errorf("image %s: no image registry mapping (spec.imageRegistryMappings) matches it, so it was not pushed", ir.Reference)
		}
		if tag, d := SplitTagDigest(target); tag != "" && d != "" {
			target = target[:len(target)-len(d)-1]
		}
		res.Target = target
		dst, err := ParseReference(target, c.opts.Insecure)
		if err != nil {
			return err
		}
		h, err := v1.NewHash(ir.Digest)
		if err != nil {
			return fmt.Errorf("image %s: recorded digest %q: %w", ir.Reference, ir.Digest, err)
		}
		var it *item
		if isIndex(ir.MediaType) {
			idx, err := bundle.Index(ctx, h)
			if err != nil {
				return fmt.Errorf("image %s: %w", ir.Reference, err)
			}
			it, err = indexItem(idx)
			if err != nil {
				return fmt.Errorf("image %s: %w", ir.Reference, err)
			}
		} else {
			img, err := bundle.Image(ctx, h)
			if err != nil {
				return fmt.Errorf("image %s: %w", ir.Reference, err)
			}
			it, err = imageItem(img)
			if err != nil {
				return fmt.Errorf("image %s: %w", ir.Reference, err)
			}
		}
		if it.digest != h {
			return fmt.Errorf("image %s: stored manifest is %s, the backup recorded %s", ir.Reference, it.digest, h)
		}
		return c.put(Task{Source: ir.Reference, Target: target}, dst, it, c.remoteOptions(ctx, &retries, &sent), &sent, &res)
	})
	res.Retries, res.BlobBytes, res.Seconds = retries.Load(), sent.Load(), time.Since(start).Seconds()
	if err != nil {
		res.Outcome, res.Error = Failed, err.Error()
	}
	return res
}

func isIndex(mt string) bool {
	switch mt {
	case "application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json":
		return true
	}
	return false
}
