// Package volumes owns pod volume data: its backup and restore with kopia
// (github.com/kopia/kopia v0.22.3, used as a library), in one encrypted,
// deduplicated kopia repository per backup storage location, under
// volumes/ in the same bucket (docs/design.md#the-store-layout), snapshots made by kopia's
// uploader (snapshot/upload) and restored by its restorer
// (snapshot/restore). Around the repository: which volumes of which pods
// a backup takes (Select), where their data is in a node's kubelet pods
// directory (HostPath) and the volume records of a backup. Who runs that
// work on a node is elsewhere: ferry's helper pods (pkg/helperpod, which
// builds every pod that reads or writes a claim) or the node agent
// (pkg/nodeagent).
package volumes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/kopia/kopia/repo"
	kblob "github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/retrying"
	"github.com/kopia/kopia/repo/content"
	"github.com/kopia/kopia/repo/format"
	"github.com/kopia/kopia/repo/maintenance"

	"github.com/kubeferry/ferry/pkg/store"
)

// EnvPassword names the environment variable the repository password is
// read from when no password file is given.
const EnvPassword = "FERRY_REPOSITORY_PASSWORD"

// kopia client identity: every ferry process is the same user on the same
// host, so that any of them owns the repository's maintenance and finds the
// snapshots of the others (a volume's parent snapshot does not depend on
// the node or machine that took it).
const (
	clientUser = "ferry"
	clientHost = "ferry"
)

// Splitter is the content-defined chunking of new repositories: chunks of
// 1 MiB on average (kopia's default is 4 MiB). A change inside a file
// re-uploads the chunks it touches, so smaller chunks keep incremental
// backups of files rewritten in place (databases, images) close to the
// size of the change; the index grows by the same factor, which is small
// next to the data.
const Splitter = "DYNAMIC-1M-BUZHASH"

// ErrNoPassword is returned when volume data is asked for without a
// repository password.
var ErrNoPassword = errors.New("no repository password: no password file given, and $" + EnvPassword + " is not set")

// ErrWrongPassword is returned (wrapped) when the password does not open
// the location's repository.
var ErrWrongPassword = errors.New("wrong repository password")

// ErrNoRepository is returned (wrapped) by Open without Create when the
// location has no repository yet.
var ErrNoRepository = errors.New("no volume repository in the location")

// ReadPassword returns the repository password from file (its content
// without the trailing newline) or, when file is "", from $FERRY_REPOSITORY_PASSWORD.
// It never includes the password in an error.
func ReadPassword(file string) (string, error) {
	if file == "" {
		if p := os.Getenv(EnvPassword); p != "" {
			return p, nil
		}
		return "", ErrNoPassword
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("repository password file: %w", err)
	}
	p := strings.TrimRight(string(data), "\r\n")
	if p == "" {
		return "", fmt.Errorf("repository password file %s: the file is empty", file)
	}
	return p, nil
}

// Repository is a location's kopia repository, connected for reading and
// writing. Close it when done: it holds a local cache directory.
type Repository struct {
	// SparseFiles makes Restore write files sparsely: blocks of zeros
	// become holes, as in a sparse source (kopia's write-sparse-files option).
	// Off by default, as in kopia and Velero: it writes block by block,
	// which is slower, and a volume's filesystem may not need it.
	SparseFiles bool

	rep     repo.DirectRepository
	st      *bucketStorage
	dir     string
	release func()
	url     string
	log     *slog.Logger
	damage  *Damage
}

// OpenOptions configure Open.
type OpenOptions struct {
	// Create initializes the repository if the location has none yet.
	Create bool
	// CacheDir holds kopia's local caches (default a new temporary
	// directory, removed on Close).
	CacheDir string
	// Log receives what Open found damaged and recovered, and a skipped
	// maintenance (default slog.Default()).
	Log *slog.Logger
}

// Open connects to the kopia repository under volumes/ in loc with
// password, first creating it when opts.Create is set and there is none.
// A new repository uses kopia's defaults, AES256-GCM-HMAC-SHA256
// encryption of every blob and BLAKE2B-256-128 content hashing, and
// content-defined chunking with Splitter. Processes creating it at the
// same time make one repository (see initialize). A repository with a
// damaged index blob still opens (see connect; Damage says what was
// found). Errors: ErrNoPassword, ErrWrongPassword and ErrNoRepository
// (wrapped), or the store's error.
func Open(ctx context.Context, loc *store.Location, password string, opts OpenOptions) (*Repository, error) {
	if password == "" {
		return nil, ErrNoPassword
	}
	handle := make([]byte, 8)
	_, _ = rand.Read(handle)
	st, release := newBucketStorage(loc.Bucket(), RepositoryPrefix, loc.URL(), hex.EncodeToString(handle))
	st.dir = localDir(loc)
	r := &Repository{st: st, release: release, url: loc.URL(), log: opts.Log}
	if r.log == nil {
		r.log = slog.Default()
	}
	ok := false
	defer func() {
		if !ok {
			r.cleanup()
		}
	}()
	created, err := r.initialize(ctx, loc, password, opts.Create)
	if err != nil {
		return nil, err
	}
	if r.dir, err = os.MkdirTemp("", "ferry-kopia-"); err != nil {
		return nil, err
	}
	cacheDir := opts.CacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(r.dir, "cache")
	}
	copts := &repo.ConnectOptions{
		ClientOptions: repo.ClientOptions{Hostname: clientHost, Username: clientUser, Description: "ferry " + loc.URL()},
		CachingOptions: content.CachingOptions{
			// No local cache (kopia: a zero content cache size turns all
			// of them off). A process reads each piece of a snapshot once,
			// and its cache would start empty anyway (it is temporary), so
			// caching would only add a local copy of every byte restored.
			CacheDirectory: cacheDir,
		},
	}
	if err := r.connect(ctx, filepath.Join(r.dir, "repository.config"), password, copts); err != nil {
		return nil, err
	}
	if created {
		// Every ferry process is the same client, so each may run maintenance.
		err := repo.WriteSession(ctx, r.rep, repo.WriteSessionOptions{Purpose: "ferry: maintenance owner"}, func(ctx context.Context, w repo.RepositoryWriter) error {
			p := maintenance.DefaultParams()
			p.Owner = clientUser + "@" + clientHost
			return maintenance.SetParams(ctx, w, &p)
		})
		if err != nil {
			r.rep.Close(ctx)
			return nil, fmt.Errorf("volume repository in %s: setting maintenance parameters: %w", r.where(), err)
		}
	}
	ok = true
	return r, nil
}

// connect connects to the repository and opens it. When that fails and
// some index blobs are damaged (they cannot be read, authenticated or
// decoded, see findDamagedIndexes), it connects again with those left out
// of kopia's listings and then rebuilds the index of the pack blobs that
// no remaining index describes from the packs themselves
// (recoverUnindexedPacks), so that every snapshot whose data is still in
// the store is readable again. The damaged blobs stay in the store;
// what was left out and recovered is logged and kept in r.damage.
func (r *Repository) connect(ctx context.Context, config, password string, copts *repo.ConnectOptions) error {
	err := r.connectOnce(ctx, config, password, copts)
	if err == nil || errors.Is(err, ErrWrongPassword) {
		return err
	}
	bad, ferr := findDamagedIndexes(ctx, r.st, password)
	if ferr != nil || len(bad) == 0 {
		return err
	}
	r.damage = &Damage{Indexes: bad}
	for _, b := range bad {
		r.st.hide(kblob.ID(strings.TrimPrefix(b.Blob, RepositoryPrefix)), b.Reason)
	}
	if err := r.connectOnce(ctx, config, password, copts); err != nil {
		return fmt.Errorf("volume repository in %s, leaving out %d damaged index blobs: %w", r.where(), len(bad), err)
	}
	if err := r.recoverUnindexedPacks(ctx); err != nil {
		return fmt.Errorf("volume repository in %s, leaving out %d damaged index blobs: %w", r.where(), len(bad), err)
	}
	r.logDamage()
	return nil
}

// connectOnce is kopia's repo.Connect and repo.Open with config.
func (r *Repository) connectOnce(ctx context.Context, config, password string, copts *repo.ConnectOptions) error {
	_ = os.Remove(config) // from a failed attempt
	if err := repo.Connect(ctx, config, retrying.NewWrapper(r.st), password, copts); err != nil {
		return r.describe(err)
	}
	rep, err := repo.Open(ctx, config, password, &repo.Options{DisableRepositoryLog: true, OnFatalError: func(error) {}})
	if err != nil {
		return r.describe(err)
	}
	dr, isDirect := rep.(repo.DirectRepository)
	if !isDirect {
		rep.Close(ctx)
		return fmt.Errorf("volume repository in %s: not a direct repository", r.where())
	}
	r.rep = dr
	return nil
}

func (r *Repository) where() string { return r.url + " " + RepositoryPrefix }

// describe turns kopia's connection errors into ferry's.
func (r *Repository) describe(err error) error {
	if errors.Is(err, repo.ErrInvalidPassword) || errors.Is(err, format.ErrInvalidPassword) {
		return fmt.Errorf("volume repository in %s: %w (it was created with another one)", r.where(), ErrWrongPassword)
	}
	return fmt.Errorf("volume repository in %s: %w", r.where(), err)
}

// Close disconnects and removes the local cache.
func (r *Repository) Close(ctx context.Context) error {
	var err error
	if r.rep != nil {
		err = r.rep.Close(ctx)
	}
	r.cleanup()
	return err
}

func (r *Repository) cleanup() {
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
	r.release()
}

// Refresh rereads the repository's indexes and manifests, so that a
// long-running process (the node agent) sees snapshots written by other
// processes since it opened the repository.
func (r *Repository) Refresh(ctx context.Context) error {
	if err := r.rep.Refresh(ctx); err != nil {
		return fmt.Errorf("refreshing the volume repository in %s: %w", r.where(), err)
	}
	return nil
}
