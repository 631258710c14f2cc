package volumes

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/kopia/kopia/repo"
	kblob "github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/retrying"
	"github.com/kopia/kopia/repo/format"

	"github.com/kubeferry/ferry/pkg/store"
)

// initWait is how long Open waits for another process's repository
// creation to complete (its kopia.repository after its kopia.blobcfg).
var initWait = time.Minute

// initialize creates the repository when the location has none and create
// is set, and reports whether this process created it. kopia's
// format.Initialize checks that kopia.repository is absent and then
// writes kopia.blobcfg and kopia.repository: two processes can both pass
// the check and write repositories with different keys. Here both writes
// are create-only (blob.PutOptions.DoNotRecreate: the backend's
// conditional write, a hard link on file://), so the first kopia.blobcfg
// written decides: its writer also writes kopia.repository, and every
// other process's creation fails on one of the two blobs, or on kopia's
// own check, and connects to the winner's repository once its
// kopia.repository is there.
func (r *Repository) initialize(ctx context.Context, loc *store.Location, password string, create bool) (bool, error) {
	exists, err := loc.Exists(ctx, RepositoryPrefix+format.KopiaRepositoryBlobID)
	if err != nil || exists {
		return false, err
	}
	if !create {
		return false, fmt.Errorf("%s%s in %s: %w", RepositoryPrefix, format.KopiaRepositoryBlobID, loc.URL(), ErrNoRepository)
	}
	opts := &repo.NewRepositoryOptions{ObjectFormat: format.ObjectFormat{Splitter: Splitter}}
	err = repo.Initialize(ctx, createOnly{retrying.NewWrapper(r.st)}, opts, password)
	if err == nil {
		return true, nil
	}
	cfg, cerr := loc.Exists(ctx, RepositoryPrefix+format.KopiaBlobCfgBlobID)
	if cerr != nil || !cfg {
		return false, fmt.Errorf("creating the volume repository in %s: %w", r.where(), err)
	}
	// Another process created it, or is creating it.
	return false, r.waitForFormat(ctx, loc)
}

// waitForFormat waits up to initWait for kopia.repository to appear.
func (r *Repository) waitForFormat(ctx context.Context, loc *store.Location) error {
	deadline := time.Now().Add(initWait)
	for {
		exists, err := loc.Exists(ctx, RepositoryPrefix+format.KopiaRepositoryBlobID)
		if err != nil || exists {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("volume repository in %s: %s%s exists, but %s%s has not appeared for %s: a creation of the repository was interrupted (if no process is creating it, delete %s%s)",
				r.where(), RepositoryPrefix, format.KopiaBlobCfgBlobID, RepositoryPrefix, format.KopiaRepositoryBlobID, initWait, RepositoryPrefix, format.KopiaBlobCfgBlobID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createOnly makes every write of kopia's repository creation create-only.
type createOnly struct{ kblob.Storage }

func (s createOnly) PutBlob(ctx context.Context, id kblob.ID, data kblob.Bytes, opts kblob.PutOptions) error {
	opts.DoNotRecreate = true
	return s.Storage.PutBlob(ctx, id, data, opts)
}

// localDir is the directory of a file:// location followed by a slash and
// the location's key prefix (gocloud's prefix parameter), so that it and a
// key make the object's path; "" for other schemes.
func localDir(loc *store.Location) string {
	u, err := url.Parse(loc.SecretURL())
	if err != nil || u.Scheme != "file" {
		return ""
	}
	return u.Path + "/" + u.Query().Get("prefix")
}
