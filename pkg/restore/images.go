package restore

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

// imageStage is the restore's image stage, run after the archive verifies
// and before anything is written to the target: it reads the backup's
// images file (checked against the commit marker), pushes the bundled
// images with spec.pushImages, and returns the rewriter the transforms use
// (nil without mappings). A damaged images file, or a bundle blob that
// does not match its digest, fails the restore before any write; a
// failed image push is a warning, or with ImagesRequired fails it.
func imageStage(ctx context.Context, loc *store.Location, b *v1alpha1.Backup, opts *Options, r *v1alpha1.Restore, results *report.Results) (*images.Rewriter, error) {
	if len(opts.Spec.ImageRegistryMappings) == 0 {
		return nil, nil
	}
	mappings, err := images.ParseMappings(opts.Spec.ImageRegistryMappings)
	if err != nil {
		return nil, err
	}
	rec, err := images.LoadRecord(ctx, loc, b)
	switch {
	case errors.Is(err, images.ErrNoImages) && !opts.Spec.PushImages:
		results.Warnf("backup %s has no images file (made with spec.images \"none\"): image references are rewritten without pinning digests", b.Name)
		return images.NewRewriter(mappings, nil), nil
	case err != nil:
		return nil, err
	}
	rw := images.NewRewriter(mappings, rec.Digests())
	if !opts.Spec.PushImages {
		return rw, nil
	}
	if rec.Mode != images.ModeBundle {
		return nil, field.Forbidden(field.NewPath("spec", "pushImages"), fmt.Sprintf("backup %s was made with spec.images %q; only a backup with spec.images %q holds images to push", b.Name, rec.Mode, images.ModeBundle))
	}
	if opts.Spec.DryRun {
		results.Warnf("spec.dryRun: the %d bundled images are not pushed", len(images.BackupIndex(rec).Manifests))
		return rw, nil
	}
	// The whole bundle is checked against its digests first, as the
	// archive is: a damaged blob refuses the restore before anything is
	// pushed or written (a missing registry, by contrast, is a per-image
	// warning below).
	bundle := images.NewBundle(loc)
	if _, _, err := bundle.Verify(ctx, rec); err != nil {
		return nil, fmt.Errorf("%w: backup %s: image bundle: %w", ErrBackupNotRestorable, b.Name, err)
	}
	c := images.NewCopier(opts.Images)
	pushed := c.PushBundled(ctx, rec, bundle, rw)
	var failed []string
	for _, p := range pushed {
		if p.Outcome == images.Failed {
			failed = append(failed, p.Error)
			r.Status.ImagesFailed++
			continue
		}
		r.Status.ImagesPushed++
		opts.Log.Info("image pushed", "source", p.Source, "target", p.Target, "outcome", p.Outcome, "digest", p.Digest, "blobBytes", p.BlobBytes)
	}
	for _, ir := range rec.Images {
		if !ir.Bundled {
			failed = append(failed, fmt.Sprintf("image %s is not in the backup's bundle: %s", ir.Reference, ir.Error))
			r.Status.ImagesFailed++
		}
	}
	for _, f := range failed {
		if opts.Spec.ImagesRequired {
			results.Errorf("%s", f)
		} else {
			results.Warnf("%s", f)
		}
	}
	if len(failed) > 0 && opts.Spec.ImagesRequired {
		return nil, fmt.Errorf("%d images could not be pushed (spec.imagesRequired), nothing was restored; the first: %s", len(failed), failed[0])
	}
	return rw, nil
}
