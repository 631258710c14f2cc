package images

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// item is an image or index ready to write: what was fetched, after the
// platform filter.
type item struct {
	img       v1.Image
	idx       v1.ImageIndex
	digest    v1.Hash
	mediaType string
	size      int64
	platforms []string
}

// source turns a fetched descriptor into an item, filtering an index by
// c's platforms.
func (c *Copier) source(desc *remote.Descriptor) (*item, error) {
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		if idx, err = c.filter(idx); err != nil {
			return nil, err
		}
		return indexItem(idx)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	return imageItem(img)
}

func indexItem(idx v1.ImageIndex) (*item, error) {
	it := &item{idx: idx}
	var err error
	if it.digest, err = idx.Digest(); err != nil {
		return nil, err
	}
	if it.size, err = idx.Size(); err != nil {
		return nil, err
	}
	mt, err := idx.MediaType()
	if err != nil {
		return nil, err
	}
	it.mediaType = string(mt)
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, m := range im.Manifests {
		if m.Platform != nil {
			it.platforms = append(it.platforms, m.Platform.String())
		}
	}
	return it, nil
}

func imageItem(img v1.Image) (*item, error) {
	it := &item{img: img}
	var err error
	if it.digest, err = img.Digest(); err != nil {
		return nil, err
	}
	if it.size, err = img.Size(); err != nil {
		return nil, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, err
	}
	it.mediaType = string(mt)
	if cf, err := img.ConfigFile(); err == nil && cf.OS != "" {
		p := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		it.platforms = []string{p.String()}
	}
	return it, nil
}

// put writes it to dst unless dst already has it by digest.
func (c *Copier) put(ctx context.Context, t Task, dst name.Reference, it *item, opts []remote.Option, res *Result) error {
	res.Digest, res.MediaType, res.Platforms = it.digest.String(), it.mediaType, it.platforms
	if d, ok := dst.(name.Digest); ok && d.DigestStr() != it.digest.String() {
		if len(c.opts.Platforms) == 0 {
			return fmt.Errorf("copy %s: target %s names digest %s, but the source is %s", t.Source, t.Target, d.DigestStr(), it.digest)
		}
		// Options.Platforms made a new index: a reference by digest names it by
		// its own digest at the target.
		dst = dst.Context().Digest(it.digest.String())
		res.Target = dst.String()
	}
	// Incremental: a target that has this manifest by digest is skipped.
	if head, err := remote.Head(dst, opts...); err == nil && head.Digest == it.digest {
		c.mounts.rememberAll(dst.Context(), it)
		res.Outcome = Present
		return nil
	}
	if c.opts.OnProgress != nil {
		ch := make(chan v1.Update, 16)
		go func() {
			for u := range ch {
				c.opts.OnProgress(t, u.Complete, u.Total)
			}
		}()
		opts = append(opts, remote.WithProgress(ch))
	}
	var err error
	repo := dst.Context()
	if it.idx != nil {
		err = remote.WriteIndex(dst, &mountIndex{inner: it.idx, ms: &c.mounts, dst: repo}, opts...)
	} else {
		err = remote.Write(dst, &mountImage{Image: it.img, ms: &c.mounts, dst: repo}, opts...)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", t.Source, explain(t.Target, "target", err))
	}
	c.mounts.rememberAll(repo, it)
	res.Outcome = Copied
	return nil
}

// filter keeps the manifests of idx whose platform satisfies one of
// c.opts.Platforms. An index with none of them is an error.
func (c *Copier) filter(idx v1.ImageIndex) (v1.ImageIndex, error) {
	if len(c.opts.Platforms) == 0 {
		return idx, nil
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	keep := func(d v1.Descriptor) bool {
		if d.Platform == nil {
			return false
		}
		for _, p := range c.opts.Platforms {
			if d.Platform.Satisfies(p) {
				return true
			}
		}
		return false
	}
	var have []string
	n := 0
	for _, m := range im.Manifests {
		if keep(m) {
			n++
		}
		if m.Platform != nil {
			have = append(have, m.Platform.String())
		}
	}
	if n == 0 {
		var want []string
		for _, p := range c.opts.Platforms {
			want = append(want, p.String())
		}
		return nil, fmt.Errorf("the index has no manifest for platform %s (it has %s)", strings.Join(want, ","), strings.Join(have, ", "))
	}
	return mutate.RemoveManifests(idx, func(d v1.Descriptor) bool { return !keep(d) }), nil
}
