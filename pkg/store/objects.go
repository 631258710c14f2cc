package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"filippo.io/age"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// PutJSON writes v as JSON at key, or gzipped JSON when key ends in ".gz".
// The write is atomic per object: readers see the old object or the new one.
// It never encrypts: use PutSealedJSON for what must not be readable in the bucket.
func (l *Location) PutJSON(ctx context.Context, key string, v any) error {
	return l.putJSON(ctx, key, v, false)
}

// PutSealedJSON is PutJSON, encrypted when the location has recipients
// (results files, which name every object of a backup).
func (l *Location) PutSealedJSON(ctx context.Context, key string, v any) error {
	return l.putJSON(ctx, key, v, l.Encrypted())
}

// jsonWriter is a value that writes its own JSON as a stream (a restore's
// results of many objects), instead of being encoded whole in memory.
type jsonWriter interface{ WriteJSON(io.Writer) error }

func (l *Location) putJSON(ctx context.Context, key string, v any, seal bool) error {
	var buf bytes.Buffer
	var w io.Writer = &buf
	var enc io.WriteCloser
	if seal {
		e, err := age.Encrypt(&buf, l.enc.Recipients...)
		if err != nil {
			return fmt.Errorf("encrypting %s: %w", key, err)
		}
		enc, w = e, e
	}
	var gz *gzip.Writer
	if strings.HasSuffix(key, ".gz") {
		gz = gzip.NewWriter(w)
		w = gz
	}
	if jw, ok := v.(jsonWriter); ok {
		if err := jw.WriteJSON(w); err != nil {
			return fmt.Errorf("encoding %s: %w", key, err)
		}
	} else {
		je := json.NewEncoder(w)
		je.SetIndent("", "  ")
		if err := je.Encode(v); err != nil {
			return fmt.Errorf("encoding %s: %w", key, err)
		}
	}
	if gz != nil {
		if err := gz.Close(); err != nil {
			return err
		}
	}
	if enc != nil {
		if err := enc.Close(); err != nil {
			return err
		}
	}
	if err := l.bucket.WriteAll(ctx, key, buf.Bytes(), nil); err != nil {
		return l.describe("writing "+key, err)
	}
	return nil
}

// GetJSON reads key (gunzipping ".gz" keys, decrypting age-encrypted ones)
// into v. A missing key gives an error wrapping ErrNotFound; an encrypted
// one without identities, ErrEncrypted.
func (l *Location) GetJSON(ctx context.Context, key string, v any) error {
	rc, err := l.NewOpenedReader(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	var r io.Reader = rc
	if strings.HasSuffix(key, ".gz") {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return fmt.Errorf("reading %s: %w", key, err)
		}
		r = gz
	}
	if err := json.NewDecoder(r).Decode(v); err != nil {
		return fmt.Errorf("reading %s: corrupt JSON: %w", key, err)
	}
	return nil
}

// Exists reports whether key exists.
func (l *Location) Exists(ctx context.Context, key string) (bool, error) {
	ok, err := l.bucket.Exists(ctx, key)
	if err != nil {
		return false, l.describe("checking "+key, err)
	}
	return ok, nil
}

// NewWriter opens a streaming writer at key. The object appears only when
// the writer is closed without error; an interrupted write leaves nothing.
func (l *Location) NewWriter(ctx context.Context, key string) (*blob.Writer, error) {
	w, err := l.bucket.NewWriter(ctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return nil, l.describe("writing "+key, err)
	}
	return w, nil
}

// NewReader opens key for streaming. A missing key wraps ErrNotFound.
func (l *Location) NewReader(ctx context.Context, key string) (*blob.Reader, error) {
	r, err := l.bucket.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
		}
		return nil, l.describe("reading "+key, err)
	}
	return r, nil
}

// BackupEntry is one backup found in the location. Backup is the committed
// object, or for an incomplete backup the started marker (or a stub), with
// its phase set to Incomplete.
type BackupEntry struct {
	Name   string
	Backup *v1alpha1.Backup
}

// ListBackups lists every backup folder in the location, committed or not,
// sorted by name.
func (l *Location) ListBackups(ctx context.Context) ([]BackupEntry, error) {
	names, err := l.listDirs(ctx, "backups/")
	if err != nil {
		return nil, err
	}
	var out []BackupEntry
	for _, n := range names {
		if ValidateBackupName(n) != nil {
			continue // not a folder ferry wrote
		}
		b, err := l.GetBackup(ctx, n)
		if err != nil && !errors.Is(err, ErrIncomplete) {
			// A damaged marker is shown, not allowed to hide the rest.
			b = v1alpha1.NewBackup(n)
			b.Status.Phase = v1alpha1.PhaseFailed
			b.Status.FailureReason = err.Error()
		}
		out = append(out, BackupEntry{Name: n, Backup: b})
	}
	return out, nil
}

// GetBackup reads the committed Backup name. If the folder exists without a
// commit marker it returns the started marker with phase Incomplete and an
// error wrapping ErrIncomplete; if nothing exists, an error wrapping ErrNotFound.
func (l *Location) GetBackup(ctx context.Context, name string) (*v1alpha1.Backup, error) {
	if err := ValidateBackupName(name); err != nil {
		return nil, err
	}
	b := &v1alpha1.Backup{}
	err := l.GetJSON(ctx, BackupDir(name)+BackupMarker, b)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	found, lerr := l.hasPrefix(ctx, BackupDir(name))
	if lerr != nil {
		return nil, lerr
	}
	if !found {
		return nil, fmt.Errorf("backup %q in %s: %w", name, l.URL(), ErrNotFound)
	}
	b = v1alpha1.NewBackup(name)
	_ = l.GetJSON(ctx, BackupDir(name)+BackupStartedMarker, b)
	b.Status.Phase = v1alpha1.PhaseIncomplete
	return b, fmt.Errorf("backup %q: %w", name, ErrIncomplete)
}

// DeleteBackup removes every object under backups/<name>/, the commit
// marker first so that a delete interrupted half way leaves an Incomplete
// backup, never a Completed one with missing parts, and the started marker
// (which holds the backup's UID) last, so that what such a delete leaves
// still says whose it is.
func (l *Location) DeleteBackup(ctx context.Context, name string) error {
	if err := ValidateBackupName(name); err != nil {
		return err
	}
	dir := BackupDir(name)
	return l.deletePrefix(ctx, dir, dir+BackupMarker, dir+BackupStartedMarker)
}

// DeleteRestore removes the records of restore name (restores/<name>/),
// its ferry-restore.json first. The restored objects in the cluster are
// not touched. A restore the location does not have is ErrNotFound.
func (l *Location) DeleteRestore(ctx context.Context, name string) error {
	if err := ValidateRestoreName(name); err != nil {
		return err
	}
	return l.deletePrefix(ctx, RestoreDir(name), RestoreDir(name)+RestoreMarker, "")
}

// GetRestore reads restore name's ferry-restore.json.
func (l *Location) GetRestore(ctx context.Context, name string) (*v1alpha1.Restore, error) {
	if err := ValidateRestoreName(name); err != nil {
		return nil, err
	}
	r := &v1alpha1.Restore{}
	if err := l.GetJSON(ctx, RestoreDir(name)+RestoreMarker, r); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("restore %q in %s: %w", name, l.URL(), ErrNotFound)
		}
		return nil, err
	}
	return r, nil
}

// ListRestores lists the restores recorded in the location, sorted by name.
func (l *Location) ListRestores(ctx context.Context) ([]*v1alpha1.Restore, error) {
	names, err := l.listDirs(ctx, "restores/")
	if err != nil {
		return nil, err
	}
	var out []*v1alpha1.Restore
	for _, n := range names {
		if ValidateRestoreName(n) != nil {
			continue
		}
		r, err := l.GetRestore(ctx, n)
		if errors.Is(err, ErrNotFound) {
			r = v1alpha1.NewRestore(n)
			r.Status.Phase = v1alpha1.PhaseIncomplete
		} else if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (l *Location) listDirs(ctx context.Context, prefix string) ([]string, error) {
	it := l.bucket.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	var names []string
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, l.describe("listing "+prefix, err)
		}
		if obj.IsDir {
			names = append(names, strings.TrimSuffix(strings.TrimPrefix(obj.Key, prefix), "/"))
		}
	}
	sort.Strings(names)
	return names, nil
}

func (l *Location) hasPrefix(ctx context.Context, prefix string) (bool, error) {
	it := l.bucket.List(&blob.ListOptions{Prefix: prefix})
	_, err := it.Next(ctx)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, l.describe("listing "+prefix, err)
	}
	return true, nil
}

func (l *Location) deletePrefix(ctx context.Context, prefix, first, last string) error {
	found, err := l.hasPrefix(ctx, prefix)
	if err != nil {
		return err
	}
	if !found {
		kind, name, _ := strings.Cut(strings.TrimSuffix(prefix, "/"), "/")
		return fmt.Errorf("%s %q in %s: %w", strings.TrimSuffix(kind, "s"), name, l.URL(), ErrNotFound)
	}
	del := func(key string) error {
		if err := l.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return l.describe("deleting "+key, err)
		}
		return nil
	}
	if first != "" {
		if err := del(first); err != nil {
			return err
		}
	}
	it := l.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return l.describe("listing "+prefix, err)
		}
		if obj.Key == last {
			continue
		}
		if err := del(obj.Key); err != nil {
			return err
		}
	}
	if last != "" {
		return del(last)
	}
	return nil
}

// PutSealedBytes writes data at key, age-encrypted when the location has
// recipients, and returns the SHA-256 (hex) of data, for a commit marker
// to pin; GetVerified checks it after decrypting.
func (l *Location) PutSealedBytes(ctx context.Context, key string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	out := data
	if l.Encrypted() {
		var buf bytes.Buffer
		w, err := age.Encrypt(&buf, l.enc.Recipients...)
		if err != nil {
			return "", fmt.Errorf("encrypting %s: %w", key, err)
		}
		if _, err := w.Write(data); err != nil {
			return "", err
		}
		if err := w.Close(); err != nil {
			return "", err
		}
		out = buf.Bytes()
	}
	if err := l.bucket.WriteAll(ctx, key, out, nil); err != nil {
		return "", l.describe("writing "+key, err)
	}
	return hex.EncodeToString(sum[:]), nil
}

// GetVerified reads key whole (decrypting it when it is age-encrypted) and
// checks it against sha256Hex; a missing key wraps ErrNotFound, a mismatch
// names the key.
func (l *Location) GetVerified(ctx context.Context, key, sha256Hex string) ([]byte, error) {
	r, err := l.NewOpenedReader(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != sha256Hex {
		return nil, fmt.Errorf("%s is damaged: its SHA-256 is %s, the commit marker records %s", key, got, sha256Hex)
	}
	return data, nil
}
