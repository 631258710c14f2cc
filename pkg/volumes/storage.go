package volumes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	kblob "github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/retrying"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// storageType is the kopia storage type name under which bucketStorage is
// registered (kopia's blob.AddSupportedStorage). A repository's local
// config names it with a process-local handle, see openHandles.
const storageType = "ferry-gocloud"

// RepositoryPrefix is where a location's kopia repository lives, under the
// location's own prefix (docs/design.md#the-store-layout).
const RepositoryPrefix = "volumes/"

// bucketStorage is kopia's blob.Storage over a gocloud.dev/blob bucket, so
// that the repository sits on the backup storage location's own backend
// (file, S3, GCS, Azure, mem) with its credentials, key prefix and retry
// policy (pkg/store). Each kopia blob ID is one object, <prefix><blob ID>.
//
// gocloud's writes are atomic (a reader sees the whole object or none) and
// its list/read are read-after-write on every provider ferry supports, the
// semantics kopia's Storage interface requires. Retention (object lock) and
// setting modification times are not supported: kopia is told so with
// ErrUnsupportedPutBlobOption and ErrSetTimeUnsupported.
type bucketStorage struct {
	kblob.DefaultProviderImplementation

	bucket *blob.Bucket
	prefix string
	name   string // for messages: the location URL, without credentials
	handle string
	// dir is the local directory of a file:// location ("" for others),
	// where create-only writes are made with a hard link (see createOnce).
	dir string

	mu     sync.Mutex
	hidden map[kblob.ID]string // blob ID -> why ListBlobs hides it (see hide)
}

// storageConfig is what kopia records in its local config file for this
// storage: only the handle of an open bucket in this process. No URL or
// credentials are ever written.
type storageConfig struct {
	Handle string `json:"handle"`
}

// openHandles maps handles to the open bucketStorage they name. kopia's
// repo.Connect and repo.Open re-create the storage from the local config
// through the registered factory, which looks the handle up here.
var openHandles sync.Map // string -> *bucketStorage

func init() {
	kblob.AddSupportedStorage(storageType, storageConfig{}, func(_ context.Context, c *storageConfig, _ bool) (kblob.Storage, error) {
		st, ok := openHandles.Load(c.Handle)
		if !ok {
			return nil, fmt.Errorf("ferry storage handle %q is not open in this process", c.Handle)
		}
		return st.(kblob.Storage), nil
	})
}

// newBucketStorage returns kopia storage over the objects of bucket under
// prefix, registered under handle until release is called. What kopia
// gets from the handle is st behind kopia's retrying wrapper
// (repo/blob/retrying): each read, write, delete and attribute read is
// retried with exponential backoff (10 attempts, about 8 s), except for
// kopia's sentinel errors (a missing blob, a range past the end, a
// create-only write of an existing blob, invalid credentials), which are
// answers, not faults. This is on top of the backend's own retries
// (pkg/store), for faults that outlast them.
func newBucketStorage(bucket *blob.Bucket, prefix, name, handle string) (st *bucketStorage, release func()) {
	st = &bucketStorage{bucket: bucket, prefix: prefix, name: name, handle: handle}
	openHandles.Store(handle, retrying.NewWrapper(st))
	return st, func() { openHandles.Delete(handle) }
}

// hide makes ListBlobs leave out blob id, for reason: a damaged index blob
// that kopia must not load (see openDamaged). The object stays in the store.
func (s *bucketStorage) hide(id kblob.ID, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hidden == nil {
		s.hidden = map[kblob.ID]string{}
	}
	s.hidden[id] = reason
}

func (s *bucketStorage) isHidden(id kblob.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.hidden[id]
	return ok
}

func (s *bucketStorage) key(id kblob.ID) string { return s.prefix + string(id) }

// translate maps gocloud error codes to kopia's sentinel errors, and wraps
// the rest with the object's key.
func (s *bucketStorage) translate(op string, id kblob.ID, err error) error {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return fmt.Errorf("%s %s: %w", op, s.key(id), kblob.ErrBlobNotFound)
	case gcerrors.FailedPrecondition:
		return fmt.Errorf("%s %s: %w", op, s.key(id), kblob.ErrBlobAlreadyExists)
	case gcerrors.PermissionDenied:
		return fmt.Errorf("%s %s in %s: %w: %w", op, s.key(id), s.name, kblob.ErrInvalidCredentials, err)
	}
	return fmt.Errorf("%s %s in %s: %w", op, s.key(id), s.name, err)
}

// GetBlob reads length bytes at offset of blob id into output (the whole
// blob when length < 0). A short blob gives ErrInvalidRange, also when the
// range starts past its end, which S3 refuses with 416 InvalidRange.
func (s *bucketStorage) GetBlob(ctx context.Context, id kblob.ID, offset, length int64, output kblob.OutputBuffer) error {
	output.Reset()
	if offset < 0 {
		return kblob.ErrInvalidRange
	}
	r, err := s.bucket.NewRangeReader(ctx, s.key(id), offset, length, nil)
	if err != nil {
		if offset > 0 && gcerrors.Code(err) != gcerrors.NotFound {
			if a, aerr := s.bucket.Attributes(ctx, s.key(id)); aerr == nil && offset+max(length, 0) > a.Size {
				return fmt.Errorf("reading %s: %d bytes at %d of a %d-byte blob: %w", s.key(id), length, offset, a.Size, kblob.ErrInvalidRange)
			}
		}
		return s.translate("reading", id, err)
	}
	defer r.Close()
	if length == 0 {
		return nil
	}
	// Not io.Copy: blob.Reader's WriteTo allocates (and zeroes) a new 1 MiB
	// buffer per call, and a restore reads each content on its own, so a
	// pooled buffer saves most of its CPU (bench/helperpods).
	buf := copyBuffers.Get().(*[]byte)
	_, err = io.CopyBuffer(output, readerOnly{r}, *buf)
	copyBuffers.Put(buf)
	if err != nil {
		return s.translate("reading", id, err)
	}
	return kblob.EnsureLengthExactly(output.Length(), length)
}

// readerOnly hides a reader's WriteTo from io.CopyBuffer.
type readerOnly struct{ io.Reader }

// copyBuffers are GetBlob's read buffers.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// GetMetadata returns the length and modification time of blob id.
func (s *bucketStorage) GetMetadata(ctx context.Context, id kblob.ID) (kblob.Metadata, error) {
	a, err := s.bucket.Attributes(ctx, s.key(id))
	if err != nil {
		return kblob.Metadata{}, s.translate("reading attributes of", id, err)
	}
	return kblob.Metadata{BlobID: id, Length: a.Size, Timestamp: a.ModTime}, nil
}

// PutBlob writes data as blob id, replacing it unless opts.DoNotRecreate,
// which makes the write create-only (ErrBlobAlreadyExists if id exists).
func (s *bucketStorage) PutBlob(ctx context.Context, id kblob.ID, data kblob.Bytes, opts kblob.PutOptions) error {
	if opts.HasRetentionOptions() {
		return fmt.Errorf("blob retention on %s: %w", s.name, kblob.ErrUnsupportedPutBlobOption)
	}
	if !opts.SetModTime.IsZero() {
		return kblob.ErrSetTimeUnsupported
	}
	if err := s.write(ctx, id, data, opts.DoNotRecreate); err != nil {
		return err
	}
	if opts.GetModTime != nil {
		a, err := s.bucket.Attributes(ctx, s.key(id))
		if err != nil {
			return s.translate("reading attributes of", id, err)
		}
		*opts.GetModTime = a.ModTime
	}
	return nil
}

// write writes data as blob id; createOnly refuses to replace an existing
// blob. gocloud's fileblob checks IfNotExist with a stat before its rename,
// which two processes (or two bucket handles) can pass together, so on a
// file:// location a create-only write is a hard link of a staged file
// instead: link(2) fails atomically when the name exists. On S3, GCS and
// Azure, IfNotExist is the service's own conditional write.
//
// A create-only write refused because the blob holds exactly data is this
// process's own earlier write, whose answer was lost (the retrying wrapper
// then writes again), and succeeds.
func (s *bucketStorage) write(ctx context.Context, id kblob.ID, data kblob.Bytes, createOnly bool) error {
	err := s.writeOnce(ctx, id, data, createOnly)
	if createOnly && errors.Is(err, kblob.ErrBlobAlreadyExists) {
		var want, got outputBuffer
		if _, werr := data.WriteTo(&want); werr == nil && s.GetBlob(ctx, id, 0, -1, &got) == nil && bytes.Equal(want.Bytes(), got.Bytes()) {
			return nil
		}
	}
	return err
}

func (s *bucketStorage) writeOnce(ctx context.Context, id kblob.ID, data kblob.Bytes, createOnly bool) error {
	if createOnly && s.dir != "" {
		if err := s.linkOnce(id, data); !errors.Is(err, errNoHardLinks) {
			return err
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, s.key(id), &blob.WriterOptions{ContentType: "application/x-kopia", IfNotExist: createOnly})
	if err != nil {
		return s.translate("writing", id, err)
	}
	if _, err := data.WriteTo(w); err != nil {
		cancel() // abandons the upload: nothing appears
		_ = w.Close()
		return s.translate("writing", id, err)
	}
	if err := w.Close(); err != nil {
		return s.translate("writing", id, err)
	}
	return nil
}

// errNoHardLinks is linkOnce's answer on a filesystem without hard links:
// the write is then gocloud's (IfNotExist, checked but not atomic).
var errNoHardLinks = errors.New("no hard links")

// linkOnce is write's create-only write on a file:// location: data is
// staged under fileblob's own staging name (which ListBlobs skips) and
// hard-linked to the blob's path.
func (s *bucketStorage) linkOnce(id kblob.ID, data kblob.Bytes) error {
	path := filepath.FromSlash(s.dir + s.key(id))
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return s.translate("writing", id, err)
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	staged := path + "." + hex.EncodeToString(suffix) + ".tmp"
	f, err := os.OpenFile(staged, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return s.translate("writing", id, err)
	}
	defer os.Remove(staged)
	_, err = data.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s in %s: %w", s.key(id), s.name, err)
	}
	err = os.Link(staged, path)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("writing %s: %w", s.key(id), kblob.ErrBlobAlreadyExists)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return errNoHardLinks
	}
	if err != nil {
		return fmt.Errorf("writing %s in %s: %w", s.key(id), s.name, err)
	}
	return nil
}

// DeleteBlob removes blob id; a missing blob is not an error.
func (s *bucketStorage) DeleteBlob(ctx context.Context, id kblob.ID) error {
	if err := s.bucket.Delete(ctx, s.key(id)); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return s.translate("deleting", id, err)
	}
	return nil
}

// stagingFile matches the temporary files gocloud's fileblob writes next to
// a key while it is being written (<key>.<hex nanoseconds>.tmp); they are
// not blobs. kopia's own blob IDs never end in ".tmp".
var stagingFile = regexp.MustCompile(`\.[0-9a-f]+\.tmp$`)

// ListBlobs calls cb for every blob whose ID starts with prefix.
func (s *bucketStorage) ListBlobs(ctx context.Context, prefix kblob.ID, cb func(kblob.Metadata) error) error {
	// On file:// gocloud reads a folder and then stats each entry: a
	// staging file another writer renames away in between fails the
	// listing with NotFound. A file:// location's folder is listed by
	// listDir, which leaves such entries out; on NotFound from any other
	// listing, it is listed again (the whole listing, before any callback,
	// so that none sees a blob twice).
	var list []kblob.Metadata
	var err error
	for attempt := 1; ; attempt++ {
		list, err = s.list(ctx, prefix)
		if err == nil || gcerrors.Code(err) != gcerrors.NotFound || attempt == listAttempts {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("listing %s in %s: %w", s.key(prefix), s.name, err)
	}
	for _, m := range list {
		if err := cb(m); err != nil {
			return err
		}
	}
	return nil
}

// listAttempts is how many times ListBlobs lists on NotFound, 10 ms
// longer apart each time.
const listAttempts = 10

// list returns the blobs whose ID starts with prefix.
func (s *bucketStorage) list(ctx context.Context, prefix kblob.ID) ([]kblob.Metadata, error) {
	if s.dir != "" && strings.HasSuffix(s.prefix, "/") && !strings.Contains(string(prefix), "/") {
		return s.listDir(prefix)
	}
	var list []kblob.Metadata
	it := s.bucket.List(&blob.ListOptions{Prefix: s.key(prefix)})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return list, nil
		}
		if err != nil {
			return nil, err
		}
		if obj.IsDir || stagingFile.MatchString(obj.Key) {
			continue
		}
		id := kblob.ID(strings.TrimPrefix(obj.Key, s.prefix))
		if s.isHidden(id) {
			continue
		}
		list = append(list, kblob.Metadata{BlobID: id, Length: obj.Size, Timestamp: obj.ModTime})
	}
}

// listDir lists a file:// location's blobs from its folder, as gocloud's
// fileblob would, but an entry that another writer removes or renames
// between the folder's read and its stat (a staging file) is left out
// instead of failing the listing.
func (s *bucketStorage) listDir(prefix kblob.ID) ([]kblob.Metadata, error) {
	dir := filepath.FromSlash(s.dir + s.prefix)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list []kblob.Metadata
	for _, e := range entries {
		name := e.Name()
		// fileblob's own files: its staging files, and the .attrs files of
		// a location opened with metadata kept.
		if e.IsDir() || !strings.HasPrefix(name, string(prefix)) || stagingFile.MatchString(s.prefix+name) || strings.HasSuffix(name, ".attrs") {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed or renamed meanwhile
		}
		if err != nil {
			return nil, err
		}
		id := kblob.ID(name)
		if s.isHidden(id) {
			continue
		}
		list = append(list, kblob.Metadata{BlobID: id, Length: info.Size(), Timestamp: info.ModTime()})
	}
	return list, nil
}

// ConnectionInfo names this storage by its handle (no URL, no credentials).
func (s *bucketStorage) ConnectionInfo() kblob.ConnectionInfo {
	return kblob.ConnectionInfo{Type: storageType, Config: &storageConfig{Handle: s.handle}}
}

// DisplayName is the location URL and the repository prefix.
func (s *bucketStorage) DisplayName() string { return s.name + " " + s.prefix }

// Close does nothing: the bucket belongs to the store.Location.
func (s *bucketStorage) Close(context.Context) error { return nil }
