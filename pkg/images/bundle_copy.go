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
		var refs []Referrer
		err = c.again(ctx, &retries, func() error {
			opts := c.remoteOptions(ctx, &retries, &sent)
			desc, err := get(ref, opts)
			if err != nil {
				return err
			}
			if it, err = c.source(desc); err != nil {
				return err
			}
			if refs, err = c.referrersToCopy(ctx, ir.Reference, ref.Context(), desc.Digest, it, opts); err != nil {
				return err
			}
			if err := bundle.writeItem(ctx, it); err != nil {
				return err
			}
			return bundle.writeReferrers(ctx, refs, c.openRemote(ref.Context(), opts))
		})
		if err != nil {
			ir.Error = explain(ir.Reference, "source", err).Error()
			return
		}
		ir.Digest, ir.MediaType, ir.Size, ir.Platforms, ir.Bundled = it.digest.String(), it.mediaType, it.size, it.platforms, true
		ir.Referrers = refs
	})
}

func (b *Bundle) writeItem(ctx context.Context, it *item) error {
	if it.idx != nil {
		return b.WriteIndex(ctx, it.idx)
	}
	return b.WriteImage(ctx, it.img)
}

// writeReferrers stores each referrer, fetched by open.
func (b *Bundle) writeReferrers(ctx context.Context, refs []Referrer, open func(Referrer) (artifact, error)) error {
	for _, r := range refs {
		a, err := open(r)
		if err == nil && a.idx != nil {
			err = b.WriteIndex(ctx, a.idx)
		} else if err == nil {
			err = b.WriteImage(ctx, a.img)
		}
		if err != nil {
			return fmt.Errorf("referrer %s (%s) of %s: %w", r.Digest, orType(r.ArtifactType), r.Subject, err)
		}
	}
	return nil
}

// openBundled opens referrers from the bundle by digest.
func openBundled(ctx context.Context, b *Bundle) func(Referrer) (artifact, error) {
	return func(r Referrer) (artifact, error) {
		h, err := v1.NewHash(r.Digest)
		if err != nil {
			return artifact{}, fmt.Errorf("recorded digest %q: %w", r.Digest, err)
		}
		if isIndex(r.MediaType) {
			idx, err := b.Index(ctx, h)
			return artifact{idx: idx}, err
		}
		img, err := b.Image(ctx, h)
		return artifact{img: img}, err
	}
}

// wanted are the bundled referrers that c's filter chooses, less those
// whose subject it leaves behind.
func (c *Copier) wanted(refs []Referrer) []Referrer {
	var out []Referrer
	dropped := map[string]bool{}
	for _, r := range refs { // a subject before its referrers
		if dropped[r.Subject] || !c.opts.Referrers.wants(r.ArtifactType) {
			dropped[r.Digest] = true // and what refers to it: it would name nothing
			continue
		}
		r.Outcome, r.Error = "", ""
		out = append(out, r)
	}
	return out
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
	ctx, w := withWaits(ctx)
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
		opts := c.remoteOptions(ctx, &retries, &sent)
		return c.putWithReferrers(ctx, Task{Source: ir.Reference, Target: target}, dst, it, func() ([]Referrer, error) { return c.wanted(ir.Referrers), nil }, openBundled(ctx, bundle), opts, c.remoteOptions(ctx, &retries, &sent), &sent, &res)
	})
	res.Retries, res.BlobBytes, res.Seconds = retries.Load(), sent.Load(), time.Since(start).Seconds()
	res.Waits, res.WaitSeconds = w.count(), w.seconds()
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
