package images

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

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
	// config is the image's config as read for its platform, uploaded
	// from memory instead of fetched again (mountImage.config).
	config []byte
	// rebuilt are the nested indexes of the fetched index that the
	// platform filter kept in part (each now a new index).
	rebuilt []v1.Hash
}

// source turns a fetched descriptor into an item, filtering an index by
// c's platforms.
func (c *Copier) source(desc *remote.Descriptor) (*item, error) {
	return itemOf(desc, c.filter)
}

// unfiltered turns a fetched descriptor into an item as it is.
func unfiltered(desc *remote.Descriptor) (*item, error) {
	return itemOf(desc, func(idx v1.ImageIndex) (v1.ImageIndex, []v1.Hash, error) { return idx, nil, nil })
}

func itemOf(desc *remote.Descriptor, filter func(v1.ImageIndex) (v1.ImageIndex, []v1.Hash, error)) (*item, error) {
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		idx, rebuilt, err := filter(idx)
		if err != nil {
			return nil, err
		}
		it, err := indexItem(idx)
		if err != nil {
			return nil, err
		}
		it.rebuilt = rebuilt
		return it, nil
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
	if it.platforms, err = indexPlatforms(idx); err != nil {
		return nil, err
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
	raw, err := img.RawConfigFile()
	if err != nil {
		return it, nil // the copy fetches it again and reports why
	}
	it.config = raw
	if cf, err := v1.ParseConfigFile(bytes.NewReader(raw)); err == nil && cf.OS != "" {
		p := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		it.platforms = []string{p.String()}
	}
	return it, nil
}

// put writes it to dst unless dst already has it by digest.
func (c *Copier) put(t Task, dst name.Reference, it *item, opts []remote.Option, sent *atomic.Int64, res *Result) error {
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
	if c.opts.OnProgress != nil {
		stop := c.watchProgress(t, it, sent)
		defer func() { stop(res.Outcome != Present) }() // a present image moved nothing
	}
	// go-containerregistry writes nothing when the target has the
	// manifest by digest (it asks with a HEAD): no PUT of it means it was
	// there (incremental).
	key := manifestPutKey(dst)
	c.putManifests.Delete(key)
	var err error
	repo := dst.Context()
	if it.idx != nil {
		err = remote.WriteIndex(dst, &mountIndex{inner: it.idx, ms: &c.mounts, dst: repo}, opts...)
		c.forgetPuts(repo, it.idx)
	} else {
		err = remote.Write(dst, &mountImage{Image: it.img, ms: &c.mounts, dst: repo, config: it.config}, opts...)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", t.Source, explain(t.Target, "target", err))
	}
	c.mounts.rememberAll(repo, it)
	stored, put := c.putManifests.LoadAndDelete(key)
	if !put {
		res.Outcome = Present
		return nil
	}
	// Signatures name the digest: a registry that stored the manifest
	// under another one (it converted it) fails the copy. Its answer to
	// the PUT says which; one that does not say is asked.
	got := stored.(string)
	if got == "" {
		head, err := remote.Head(dst, opts...)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Source, explain(t.Target, "target", err))
		}
		got = head.Digest.String()
	}
	if got != it.digest.String() {
		return fmt.Errorf("copy %s: the target registry names %s %s, not %s: it changed the manifest, and signatures and digest references name %s", t.Source, t.Target, got, it.digest, it.digest)
	}
	res.Outcome = Copied
	return nil
}

// filter keeps the manifests of idx whose platform satisfies one of
// c.opts.Platforms, descending into nested indexes (filterIndex). An
// index with none of them is an error that names the platforms it has.
// rebuilt are the nested indexes kept in part, outermost last.
func (c *Copier) filter(idx v1.ImageIndex) (_ v1.ImageIndex, rebuilt []v1.Hash, _ error) {
	if len(c.opts.Platforms) == 0 {
		return idx, nil, nil
	}
	out, n, err := c.filterIndex(idx, &rebuilt)
	if err != nil {
		return nil, nil, err
	}
	if n > 0 {
		return out, rebuilt, nil
	}
	var want []string
	for _, p := range c.opts.Platforms {
		want = append(want, p.String())
	}
	have, err := indexPlatforms(idx)
	if err != nil {
		return nil, nil, err
	}
	if len(have) == 0 {
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("the index has no manifest for platform %s (none of its %d manifests names a platform)", strings.Join(want, ","), len(im.Manifests))
	}
	return nil, nil, fmt.Errorf("the index has no manifest for platform %s (it has %s)", strings.Join(want, ","), strings.Join(have, ", "))
}

// wants reports whether p satisfies one of c.opts.Platforms.
func (c *Copier) wants(p *v1.Platform) bool {
	if p == nil {
		return false
	}
	for _, w := range c.opts.Platforms {
		if p.Satisfies(w) {
			return true
		}
	}
	return false
}

// filterIndex returns idx with only the manifests c wants, and how many
// images it keeps. A manifest that is itself an index is filtered the same
// way, unless its descriptor names a platform c does not want: it is kept,
// filtered, when anything of it is kept, and dropped otherwise. Kept
// images, and nested indexes kept whole, keep their digests; an index that
// lost a manifest is a new one, in the same order; the nested ones are
// added to rebuilt (by their old digests).
func (c *Copier) filterIndex(idx v1.ImageIndex, rebuilt *[]v1.Hash) (v1.ImageIndex, int, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, 0, err
	}
	n, dropped := 0, false
	keptIndexes := map[v1.Hash]bool{}
	filtered := map[int]v1.ImageIndex{} // position -> nested index that lost manifests
	for i, d := range im.Manifests {
		if !d.MediaType.IsIndex() {
			if c.wants(d.Platform) {
				n++
			} else {
				dropped = true
			}
			continue
		}
		if d.Platform != nil && !c.wants(d.Platform) {
			dropped = true
			continue
		}
		child, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, 0, fmt.Errorf("nested index %s: %w", d.Digest, err)
		}
		fc, k, err := c.filterIndex(child, rebuilt)
		if err != nil {
			return nil, 0, fmt.Errorf("nested index %s: %w", d.Digest, err)
		}
		h, err := fc.Digest()
		if err != nil {
			return nil, 0, fmt.Errorf("nested index %s: %w", d.Digest, err)
		}
		switch {
		case k == 0:
			dropped = true
		case h != d.Digest:
			filtered[i] = fc
			*rebuilt = append(*rebuilt, d.Digest)
		default:
			keptIndexes[d.Digest] = true
		}
		n += k
	}
	switch {
	case len(filtered) > 0:
		out, err := c.rebuild(idx, im, keptIndexes, filtered)
		return out, n, err
	case dropped:
		return mutate.RemoveManifests(idx, func(d v1.Descriptor) bool {
			if d.MediaType.IsIndex() {
				return !keptIndexes[d.Digest]
			}
			return !c.wants(d.Platform)
		}), n, nil
	}
	return idx, n, nil
}

// rebuild is idx with the manifests filterIndex keeps, in their order:
// the nested indexes in filtered replaced by their filtered copies.
func (c *Copier) rebuild(idx v1.ImageIndex, im *v1.IndexManifest, keptIndexes map[v1.Hash]bool, filtered map[int]v1.ImageIndex) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for i, d := range im.Manifests {
		var add mutate.Appendable
		var err error
		switch {
		case filtered[i] != nil:
			add = filtered[i]
			// Digest, size and data come from the filtered copy.
			d.Digest, d.Size, d.Data = v1.Hash{}, 0, nil
		case d.MediaType.IsIndex() && keptIndexes[d.Digest]:
			add, err = idx.ImageIndex(d.Digest)
		case !d.MediaType.IsIndex() && c.wants(d.Platform):
			add, err = idx.Image(d.Digest)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", d.Digest, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: add, Descriptor: d})
	}
	none := mutate.RemoveManifests(idx, func(v1.Descriptor) bool { return true })
	return mutate.AppendManifests(none, adds...), nil
}

// indexPlatforms lists the platforms of the images in idx, those of
// nested indexes included, each once, in order.
func indexPlatforms(idx v1.ImageIndex) ([]string, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, m := range im.Manifests {
		if !m.MediaType.IsIndex() {
			if m.Platform != nil {
				add(m.Platform.String())
			}
			continue
		}
		child, err := idx.ImageIndex(m.Digest)
		if err != nil {
			return nil, fmt.Errorf("nested index %s: %w", m.Digest, err)
		}
		ps, err := indexPlatforms(child)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			add(p)
		}
	}
	return out, nil
}

// progressEvery is how often watchProgress reports an upload.
const progressEvery = 200 * time.Millisecond

// watchProgress calls Options.OnProgress with the blob bytes of it sent
// so far (counted on the wire by countingTransport) until the returned
// stop is called (with last, once more). go-containerregistry's WithProgress is not used: it
// closes its channel when Write returns while the HTTP transport may
// still be reading a request body, and the next read panics with a send
// on a closed channel (seen under a flaky registry).
func (c *Copier) watchProgress(t Task, it *item, sent *atomic.Int64) (stop func(last bool)) {
	total, base := uploadSize(it), sent.Load()
	report := func() {
		n := sent.Load() - base
		if n > total {
			n = total // a retried upload counts its bytes again
		}
		c.opts.OnProgress(t, n, total)
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				report()
			}
		}
	}()
	return func(last bool) {
		close(done)
		<-finished
		if last {
			report()
		}
	}
}

// uploadSize is the size of the blobs it references (layers and configs,
// through nested indexes); a part that cannot be read counts as nothing.
func uploadSize(it *item) int64 {
	if it.img != nil {
		return imageBlobSize(it.img)
	}
	return indexBlobSize(it.idx)
}

func imageBlobSize(img v1.Image) int64 {
	m, err := img.Manifest()
	if err != nil {
		return 0
	}
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}

func indexBlobSize(idx v1.ImageIndex) int64 {
	im, err := idx.IndexManifest()
	if err != nil {
		return 0
	}
	var n int64
	for _, d := range im.Manifests {
		switch {
		case d.MediaType.IsIndex():
			if child, err := idx.ImageIndex(d.Digest); err == nil {
				n += indexBlobSize(child)
			}
		case d.MediaType.IsImage():
			if img, err := idx.Image(d.Digest); err == nil {
				n += imageBlobSize(img)
			}
		}
	}
	return n
}
