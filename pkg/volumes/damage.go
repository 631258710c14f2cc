package volumes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/kopia/kopia/repo"
	kblob "github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/content"
	"github.com/kopia/kopia/repo/content/indexblob"
	"github.com/kopia/kopia/repo/format"
)

// indexBlobPrefixes are the blob ID prefixes of kopia's index blobs: the
// epoch manager's uncompacted, single-epoch compacted and range
// checkpoint indexes (xn, xs, xr) and the legacy v0 indexes (n). Epoch
// markers (xe) and deletion watermarks (xw) hold no index.
var indexBlobPrefixes = []kblob.ID{"xn", "xs", "xr", indexblob.V0IndexBlobPrefix}

// Damage is what Open found wrong with the repository's indexes and what
// it did about it. The store is not changed by it except for the index
// blobs that recovery adds: damaged blobs stay where they are.
type Damage struct {
	// Indexes are the index blobs that could not be read or decoded; Open
	// leaves them out (kopia never loads them).
	Indexes []DamagedBlob `json:"indexes,omitempty"`
	// RecoveredPacks is how many pack blobs that no readable index
	// described got their index rebuilt from the pack's own copy (kopia's
	// RecoverIndexFromPackBlob), and RecoveredContents how many contents
	// they hold.
	RecoveredPacks    int `json:"recoveredPacks,omitempty"`
	RecoveredContents int `json:"recoveredContents,omitempty"`
	// Unrecovered are the pack blobs whose index could not be rebuilt:
	// the contents they hold are lost, and so are the snapshots using them.
	Unrecovered []DamagedBlob `json:"unrecovered,omitempty"`
}

// DamagedBlob names a blob and why it is damaged.
type DamagedBlob struct {
	Blob   string `json:"blob"`
	Reason string `json:"reason"`
}

// Damage returns what Open found damaged in the repository's indexes, or
// nil when nothing was.
func (r *Repository) Damage() *Damage { return r.damage }

// findDamagedIndexes reads and decodes every index blob with the
// repository's format (kopia's content.ParseIndexBlob: decryption,
// authentication, index structure) and returns those that fail. A blob
// deleted meanwhile (by another process's compaction) is not damaged.
func findDamagedIndexes(ctx context.Context, st kblob.Storage, password string) ([]DamagedBlob, error) {
	fm, err := format.NewManager(ctx, st, "", time.Minute, password, time.Now)
	if err != nil {
		return nil, fmt.Errorf("reading the repository format: %w", err)
	}
	var bad []DamagedBlob
	for _, prefix := range indexBlobPrefixes {
		err := st.ListBlobs(ctx, prefix, func(bm kblob.Metadata) error {
			var buf outputBuffer
			err := st.GetBlob(ctx, bm.BlobID, 0, -1, &buf)
			if errors.Is(err, kblob.ErrBlobNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if _, err := parseIndexBlob(content.ParseIndexBlob, bm.BlobID, buf.Bytes(), fm); err != nil {
				bad = append(bad, DamagedBlob{Blob: RepositoryPrefix + string(bm.BlobID), Reason: err.Error()})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return bad, nil
}

// parseIndexBlob calls kopia's content.ParseIndexBlob, whose data and
// crypter parameters have types of kopia's internal packages
// (gather.Bytes, blobcrypto.Crypter), which ferry cannot name: B is
// gather.Bytes, built through its exported Slices field, and C the crypter
// interface, which the format manager implements.
func parseIndexBlob[B, C any](parse func(kblob.ID, B, C) ([]content.Info, error), id kblob.ID, data []byte, fm *format.Manager) ([]content.Info, error) {
	var b B
	slices := reflect.ValueOf(&b).Elem().FieldByName("Slices")
	if !slices.IsValid() {
		return nil, fmt.Errorf("kopia's index parser takes an unknown data type %T", b)
	}
	slices.Set(reflect.ValueOf([][]byte{data}))
	c, ok := any(fm).(C)
	if !ok {
		return nil, fmt.Errorf("kopia's format manager is not the crypter its index parser takes")
	}
	return parse(id, b, c)
}

// outputBuffer is a kopia blob.OutputBuffer in memory.
type outputBuffer struct{ bytes.Buffer }

func (b *outputBuffer) Length() int { return b.Len() }

// recoverUnindexedPacks rebuilds, from the pack's own local index (kopia's
// RecoverIndexFromPackBlob, as `kopia index recover --commit`), the index
// entries of every pack blob that no readable index describes, and writes
// them as a new index blob. Open calls it after leaving out a damaged
// index, whose packs are then undescribed. A pack being written by another
// process at that moment, whose index that process has not written yet,
// gets the same entries twice, which kopia merges.
func (r *Repository) recoverUnindexedPacks(ctx context.Context) error {
	err := repo.DirectWriteSession(ctx, r.rep, repo.WriteSessionOptions{Purpose: "ferry: index recovery"}, func(ctx context.Context, w repo.DirectRepositoryWriter) error {
		orphans, err := r.unindexedPacks(ctx, w.ContentManager())
		if err != nil {
			return err
		}
		for _, bm := range orphans {
			infos, err := w.ContentManager().RecoverIndexFromPackBlob(ctx, bm.BlobID, bm.Length, true)
			if err != nil {
				r.damage.Unrecovered = append(r.damage.Unrecovered, DamagedBlob{Blob: RepositoryPrefix + string(bm.BlobID), Reason: err.Error()})
				continue
			}
			r.damage.RecoveredPacks++
			r.damage.RecoveredContents += len(infos)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recovering the index from pack blobs: %w", err)
	}
	return r.rep.Refresh(ctx)
}

// unindexedPacks lists the pack blobs that no loaded index describes.
func (r *Repository) unindexedPacks(ctx context.Context, cm *content.WriteManager) ([]kblob.Metadata, error) {
	described := map[kblob.ID]bool{}
	err := cm.IteratePacks(ctx, content.IteratePackOptions{IncludePacksWithOnlyDeletedContent: true}, func(p content.PackInfo) error {
		described[p.PackID] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the packs of the readable indexes: %w", err)
	}
	var orphans []kblob.Metadata
	for _, prefix := range content.PackBlobIDPrefixes {
		err := r.st.ListBlobs(ctx, prefix, func(bm kblob.Metadata) error {
			if !described[bm.BlobID] {
				orphans = append(orphans, bm)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(orphans, func(i, j int) bool { return orphans[i].BlobID < orphans[j].BlobID })
	return orphans, nil
}

// logDamage reports what Open found and did.
func (r *Repository) logDamage() {
	d := r.damage
	for _, b := range d.Indexes {
		r.log.Warn("damaged volume repository index blob left out", "location", r.url, "blob", b.Blob, "reason", b.Reason)
	}
	r.log.Warn("volume repository index recovered from pack blobs", "location", r.url, "packs", d.RecoveredPacks, "contents", d.RecoveredContents, "unrecovered", len(d.Unrecovered))
	for _, b := range d.Unrecovered {
		r.log.Error("volume repository pack blob not recovered: its contents are lost", "location", r.url, "blob", b.Blob, "reason", b.Reason)
	}
}
