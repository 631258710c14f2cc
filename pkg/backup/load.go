package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/store"
)

// ErrNotRestorable is wrapped when a stored backup is missing, incomplete
// or failed, or its data does not verify.
var ErrNotRestorable = errors.New("backup is not restorable")

// ErrNeedIdentity is wrapped when the backup is encrypted and no identity
// that can decrypt it was given.
var ErrNeedIdentity = errors.New("no age identity given")

// Load reads the committed backup name and its archive, verified against
// the digests in ferry-backup.json and the manifest. Nothing is returned
// unless all of it verifies. The items' bytes wait in the archive's spool
// file (archive.Read): the caller must Close the archive.
func Load(ctx context.Context, loc *store.Location, name string) (*archive.Archive, *v1alpha1.Backup, error) {
	return load(ctx, loc, name, archive.Read)
}

// Verify is Load keeping no item bytes (archive.Verify): the archive's
// entries, verified, for a command that lists or checks them.
func Verify(ctx context.Context, loc *store.Location, name string) (*archive.Archive, *v1alpha1.Backup, error) {
	return load(ctx, loc, name, archive.Verify)
}

func load(ctx context.Context, loc *store.Location, name string, read func(io.Reader, string, archive.Expect) (*archive.Archive, error)) (*archive.Archive, *v1alpha1.Backup, error) {
	b, err := loc.GetBackup(ctx, name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrIncomplete) {
			return nil, nil, fmt.Errorf("%w: %w", ErrNotRestorable, err)
		}
		return nil, nil, err
	}
	if b.Status.Phase != v1alpha1.PhaseCompleted && b.Status.Phase != v1alpha1.PhasePartiallyFailed {
		return nil, nil, fmt.Errorf("%w: backup %q is %s: %s", ErrNotRestorable, name, b.Status.Phase, b.Status.FailureReason)
	}
	if b.Status.Archive == nil || b.Status.Archive.Key == "" {
		return nil, nil, fmt.Errorf("%w: backup %q has no archive record (status.archive.key) in its ferry-backup.json", ErrNotRestorable, name)
	}
	rd, err := loc.NewOpenedReader(ctx, b.Status.Archive.Key)
	if errors.Is(err, store.ErrEncrypted) {
		return nil, nil, fmt.Errorf("backup %q is encrypted with age for %s: %w (in server mode: spec.encryptionIdentitySecret)", name, strings.Join(b.Spec.EncryptionRecipients, ", "), ErrNeedIdentity)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: backup %q: %w", ErrNotRestorable, name, err)
	}
	defer rd.Close()
	a, err := read(rd, b.Status.Archive.Key, archive.Expect{Size: b.Status.Archive.Size, SHA256: b.Status.Archive.SHA256, ManifestSHA256: b.Status.Archive.ManifestSHA256})
	if err != nil {
		return nil, nil, fmt.Errorf("backup %q: %w", name, err)
	}
	return a, b, nil
}
