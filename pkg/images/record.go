package images

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Modes of a backup's images step (BackupSpec.Images).
const (
	ModeNone   = "none"   // images are not looked at
	ModeRecord = "record" // references resolved to digests and recorded
	ModeCopy   = "copy"   // and copied to the mapped registries
	ModeBundle = "bundle" // and written into the store (images/blobs)
)

// ValidateMode checks an images mode (BackupSpec.Images, Options.Mode).
func ValidateMode(m string) error {
	switch m {
	case ModeNone, ModeRecord, ModeCopy, ModeBundle:
		return nil
	}
	return fmt.Errorf("images mode %q: want none, record, copy or bundle", m)
}

// Record is the images file of a backup (backups/<name>/<name>-images.json):
// every image reference its workloads name, sorted by reference.
type Record struct {
	Mode   string        `json:"mode"`
	Images []ImageRecord `json:"images"`
	// Malformed lists the references that do not parse, naming where.
	Malformed []string `json:"malformed,omitempty"`
}

// ImageRecord is one image reference as written in pod specs. Digest
// ("sha256:<hex>"), MediaType and Platforms (of an index, "os/arch")
// are what the registry resolved it to at backup time. Copy holds the
// copy to the mapped registry (mode copy); Bundled is set when the image
// is in the store (mode bundle). Error is why it could not be resolved,
// copied or bundled.
type ImageRecord struct {
	Reference string `json:"reference"`
	Digest    string `json:"digest,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
	// Size is the size of the manifest (or index) in bytes.
	Size      int64    `json:"size,omitempty"`
	Platforms []string `json:"platforms,omitempty"`
	UsedBy    []Use    `json:"usedBy"`
	Copy      *Result  `json:"copy,omitempty"`
	// Referrers are the referrers bundled with the image (mode bundle).
	Referrers []Referrer `json:"referrers,omitempty"`
	Bundled   bool       `json:"bundled,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Referrers maps each image's digest to the referrers that travelled
// with it: those bundled (mode bundle) or copied (mode copy).
func (r *Record) Referrers() map[string][]Referrer {
	out := map[string][]Referrer{}
	for _, ir := range r.Images {
		refs := ir.Referrers
		if ir.Copy != nil {
			refs = ir.Copy.Referrers
		}
		if len(refs) > 0 && ir.Digest != "" {
			out[ir.Digest] = refs
		}
	}
	return out
}

// Failed counts the images with an error, plus malformed references.
func (r *Record) Failed() int {
	n := len(r.Malformed)
	for _, i := range r.Images {
		if i.Error != "" {
			n++
		}
	}
	return n
}

// Digests maps each resolved reference to its digest, for Rewriter.
func (r *Record) Digests() map[string]string {
	out := map[string]string{}
	for _, i := range r.Images {
		if i.Digest != "" {
			out[i.Reference] = i.Digest
		}
	}
	return out
}

// Collector gathers the images of workload objects as a backup lists
// them. It is safe for concurrent use.
type Collector struct {
	mu        sync.Mutex
	byRef     map[string]*ImageRecord
	malformed []string
}

// NewCollector returns an empty Collector.
func NewCollector() *Collector { return &Collector{byRef: map[string]*ImageRecord{}} }

// Add records the images of obj (see Find). A malformed reference is
// recorded in Malformed, naming the object and container, and left out.
func (c *Collector) Add(obj map[string]any) {
	found := Find(obj)
	if len(found) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range found {
		if _, err := f.Parse(); err != nil {
			c.malformed = append(c.malformed, err.Error())
			continue
		}
		r := c.byRef[f.Reference]
		if r == nil {
			r = &ImageRecord{Reference: f.Reference}
			c.byRef[f.Reference] = r
		}
		r.UsedBy = append(r.UsedBy, f.Use)
	}
}

// Record returns what was collected, sorted.
func (c *Collector) Record(mode string) *Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := &Record{Mode: mode, Images: []ImageRecord{}, Malformed: append([]string(nil), c.malformed...)}
	for _, r := range c.byRef {
		ir := *r
		sort.Slice(ir.UsedBy, func(i, j int) bool { return ir.UsedBy[i].String() < ir.UsedBy[j].String() })
		rec.Images = append(rec.Images, ir)
	}
	sort.Slice(rec.Images, func(i, j int) bool { return rec.Images[i].Reference < rec.Images[j].Reference })
	sort.Strings(rec.Malformed)
	return rec
}

// ResolveTimeout bounds the resolution of one image in Resolve, retries
// included, so that a registry that drops packets cannot hold a backup up.
const ResolveTimeout = 30 * time.Second

// Resolve fills in the digest, media type and platforms of every image of
// rec at its registry, c's concurrency at a time; a failure is the
// image's Error.
func (c *Copier) Resolve(ctx context.Context, rec *Record) {
	c.each(ctx, rec, func(_ int, ir *ImageRecord) {
		ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
		defer cancel()
		desc, plats, err := c.Describe(ctx, ir.Reference)
		if err != nil {
			ir.Error = err.Error()
			return
		}
		ir.Digest, ir.MediaType, ir.Platforms = desc.Digest.String(), string(desc.MediaType), plats
	})
}

// CopyRecord copies every image of rec to its target under rw (mode
// copy). An image no mapping matches is an error for that image. The
// target keeps the tag (or, for a reference by digest only, the digest).
func (c *Copier) CopyRecord(ctx context.Context, rec *Record, rw *Rewriter) {
	c.each(ctx, rec, func(_ int, ir *ImageRecord) {
		target, changed, err := rw.Rewrite(ir.Reference)
		switch {
		case err != nil:
			ir.Error = err.Error()
			return
		case !changed:
			ir.Error = fmt.Sprintf("image %s: no image registry mapping (spec.imageRegistryMappings) matches it, so it was not copied", ir.Reference)
			return
		}
		if tag, d := SplitTagDigest(target); tag != "" && d != "" {
			target = target[:len(target)-len(d)-1]
		}
		res := c.Copy(ctx, Task{Source: ir.Reference, Target: target})
		ir.Copy = &res
		if res.Outcome == Failed {
			ir.Error = res.Error
			return
		}
		ir.Digest, ir.MediaType, ir.Platforms = res.Digest, res.MediaType, res.Platforms
	})
}

// each runs f on every image of rec, c's concurrency at a time.
func (c *Copier) each(ctx context.Context, rec *Record, f func(int, *ImageRecord)) {
	sem := make(chan struct{}, c.opts.Concurrency)
	var wg sync.WaitGroup
	for i := range rec.Images {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i, &rec.Images[i])
		}()
	}
	wg.Wait()
}
