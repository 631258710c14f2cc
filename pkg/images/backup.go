package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// BackupOptions configure the image step of a backup.
type BackupOptions struct {
	// Mode is ModeRecord, ModeCopy or ModeBundle (ModeNone skips the step).
	Mode string
	// Mappings name the target registries of ModeCopy.
	Mappings []Mapping
	// Copy configures registry access (platforms, concurrency, retries, auth).
	Copy Options
}

// Backup runs the image step of backup name on rec (the images its
// workloads name): it resolves, copies or bundles them by mode, then
// writes the images file (and, for bundle, the backup's image index) to
// loc. It must run before the backup's commit marker is written, which
// pins both files by the SHA-256 in the returned summary. Failed images
// are in rec (Error) and counted in the summary; the error is non-nil
// only when the files could not be written.
func Backup(ctx context.Context, loc *store.Location, name string, rec *Record, o BackupOptions) (*v1alpha1.ImagesSummary, error) {
	c := NewCopier(o.Copy)
	sum := &v1alpha1.ImagesSummary{Mode: o.Mode, Key: store.BackupImagesKey(name)}
	switch o.Mode {
	case ModeRecord:
		c.Resolve(ctx, rec)
	case ModeCopy:
		c.CopyRecord(ctx, rec, NewRewriter(o.Mappings, nil))
	case ModeBundle:
		b := NewBundle(loc)
		if err := b.WriteLayoutMarker(ctx); err != nil {
			return nil, err
		}
		c.BundleRecord(ctx, rec, b)
		st := b.Stats()
		sum.BlobsWritten, sum.BlobsReused, sum.BytesWritten = st.BlobsWritten, st.BlobsReused, st.BytesWritten
		data, err := marshalIndex(BackupIndex(rec))
		if err != nil {
			return nil, err
		}
		sum.IndexKey = store.BackupImageIndexKey(name)
		if sum.IndexSHA256, err = loc.PutSealedBytes(ctx, sum.IndexKey, data); err != nil {
			return nil, err
		}
	default:
		return nil, ValidateMode(o.Mode)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	if sum.SHA256, err = loc.PutSealedBytes(ctx, sum.Key, data); err != nil {
		return nil, err
	}
	sum.Images, sum.Failed = len(rec.Images), rec.Failed()
	return sum, nil
}

// ErrNoImages is returned by LoadRecord for a backup made with spec.images "none"
// (or before images were recorded).
var ErrNoImages = errors.New("the backup has no images file")

// LoadRecord reads a backup's images file, checked against the SHA-256
// its commit marker pins.
func LoadRecord(ctx context.Context, loc *store.Location, b *v1alpha1.Backup) (*Record, error) {
	s := b.Status.Images
	if s == nil || s.Key == "" {
		return nil, fmt.Errorf("backup %q: %w", b.Name, ErrNoImages)
	}
	data, err := loc.GetVerified(ctx, s.Key, s.SHA256)
	if err != nil {
		return nil, fmt.Errorf("backup %q: images file: %w", b.Name, err)
	}
	rec := &Record{}
	if err := json.Unmarshal(data, rec); err != nil {
		return nil, fmt.Errorf("backup %q: images file %s: %w", b.Name, s.Key, err)
	}
	if s.IndexKey != "" {
		if _, err := loc.GetVerified(ctx, s.IndexKey, s.IndexSHA256); err != nil {
			return nil, fmt.Errorf("backup %q: image index: %w", b.Name, err)
		}
	}
	return rec, nil
}
