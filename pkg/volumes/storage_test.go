package volumes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kblob "github.com/kopia/kopia/repo/blob"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestBucketStorage runs the same cases on an in-memory bucket and on a
// real S3 server (versitygw), whose answers (a refused overwrite, a range
// past the end, a missing key) the adapter must map to kopia's errors.
func TestBucketStorage(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		b := memblob.OpenBucket(nil)
		defer b.Close()
		testBucketStorage(t, b, "mem://", "")
	})
	t.Run("file", func(t *testing.T) {
		loc, dir := openTestStore(t)
		testBucketStorage(t, loc.Bucket(), loc.URL(), dir+"/")
	})
	t.Run("versitygw", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts versitygw")
		}
		ctx := context.Background()
		s3, err := testenv.StartS3(ctx, t)
		if err != nil {
			t.Fatal(err)
		}
		if err := s3.CreateBucket(ctx, "storage"); err != nil {
			t.Fatal(err)
		}
		loc, err := store.Open(ctx, s3.URL("storage"), store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}))
		if err != nil {
			t.Fatal(err)
		}
		defer loc.Close()
		testBucketStorage(t, loc.Bucket(), loc.URL(), "")
	})
}

// testBucketStorage runs the cases on b; dir is a file:// location's
// directory (see bucketStorage.dir).
func testBucketStorage(t *testing.T, b *blob.Bucket, name, dir string) {
	ctx := context.Background()
	// An object outside the prefix and a fileblob staging file are not blobs.
	for key, data := range map[string]string{"backups/x": "x", "volumes/p1.18a3f0c2b.tmp": "partial"} {
		if err := b.WriteAll(ctx, key, []byte(data), nil); err != nil {
			t.Fatal(err)
		}
	}
	st, release := newBucketStorage(b, "volumes/", name, "h-"+t.Name())
	defer release()
	st.dir = dir

	put := func(id string, data string, opts kblob.PutOptions) error {
		return st.PutBlob(ctx, kblob.ID(id), sliceBytes(data), opts)
	}
	if err := put("p1", "hello world", kblob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := put("q2", "second", kblob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Exists(ctx, "volumes/p1"); !ok {
		t.Fatal("blob p1 is not at volumes/p1")
	}
	var buf outBuf
	if err := st.GetBlob(ctx, "p1", 0, -1, &buf); err != nil || buf.String() != "hello world" {
		t.Fatalf("get: %q %v", buf.String(), err)
	}
	if err := st.GetBlob(ctx, "p1", 6, 5, &buf); err != nil || buf.String() != "world" {
		t.Fatalf("range: %q %v", buf.String(), err)
	}
	if err := st.GetBlob(ctx, "p1", 6, 50, &buf); !errors.Is(err, kblob.ErrInvalidRange) {
		t.Errorf("short range: %v", err)
	}
	if err := st.GetBlob(ctx, "p1", 20, 5, &buf); !errors.Is(err, kblob.ErrInvalidRange) {
		t.Errorf("range past the end: %v", err)
	}
	if err := st.GetBlob(ctx, "nope", 0, -1, &buf); !errors.Is(err, kblob.ErrBlobNotFound) {
		t.Errorf("missing: %v", err)
	}
	if _, err := st.GetMetadata(ctx, "nope"); !errors.Is(err, kblob.ErrBlobNotFound) {
		t.Errorf("missing metadata: %v", err)
	}
	md, err := st.GetMetadata(ctx, "p1")
	if err != nil || md.Length != 11 || md.Timestamp.IsZero() {
		t.Errorf("metadata %+v %v", md, err)
	}
	if err := put("p1", "again", kblob.PutOptions{DoNotRecreate: true}); !errors.Is(err, kblob.ErrBlobAlreadyExists) {
		t.Errorf("DoNotRecreate: %v", err)
	}
	// The same bytes again: this process's own write, whose answer was lost.
	if err := put("p1", "hello world", kblob.PutOptions{DoNotRecreate: true}); err != nil {
		t.Errorf("DoNotRecreate of the same bytes: %v", err)
	}
	if err := put("p5", "new", kblob.PutOptions{DoNotRecreate: true}); err != nil {
		t.Errorf("DoNotRecreate of a new blob: %v", err)
	} else if err := st.DeleteBlob(ctx, "p5"); err != nil {
		t.Fatal(err)
	}
	if err := put("p3", "x", kblob.PutOptions{RetentionPeriod: 1}); !errors.Is(err, kblob.ErrUnsupportedPutBlobOption) {
		t.Errorf("retention: %v", err)
	}
	var mt = md.Timestamp
	if err := put("p4", "x", kblob.PutOptions{GetModTime: &mt}); err != nil || mt.IsZero() {
		t.Errorf("GetModTime: %v %v", mt, err)
	}
	var ids []string
	if err := st.ListBlobs(ctx, "p", func(m kblob.Metadata) error { ids = append(ids, string(m.BlobID)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != "p1" || ids[1] != "p4" {
		t.Errorf("list p: %v", ids)
	}
	if err := st.DeleteBlob(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteBlob(ctx, "p1"); err != nil {
		t.Errorf("deleting a missing blob: %v", err)
	}
	all, _ := kblob.ListAllBlobs(ctx, st, "")
	if len(all) != 2 {
		t.Errorf("after delete: %v", all)
	}
	// kopia re-creates the storage from its config by handle.
	again, err := kblob.NewStorage(ctx, st.ConnectionInfo(), false)
	if err != nil || again.DisplayName() != st.DisplayName() {
		t.Fatalf("NewStorage from ConnectionInfo: %v", err)
	}
	// That storage retries faults (kopia's retrying wrapper, whose first
	// retry waits 100 ms), but not kopia's sentinel answers.
	t0 := time.Now()
	if err := again.GetBlob(ctx, "missing", 0, -1, &outBuf{}); !errors.Is(err, kblob.ErrBlobNotFound) {
		t.Errorf("missing blob through kopia's storage: %v", err)
	}
	if err := again.GetBlob(ctx, "q2", 100, 10, &outBuf{}); !errors.Is(err, kblob.ErrInvalidRange) {
		t.Errorf("range past the end through kopia's storage: %v", err)
	}
	if err := again.PutBlob(ctx, "q2", sliceBytes("other"), kblob.PutOptions{DoNotRecreate: true}); !errors.Is(err, kblob.ErrBlobAlreadyExists) {
		t.Errorf("create-only write of an existing blob through kopia's storage: %v", err)
	}
	if d := time.Since(t0); d > 90*time.Millisecond {
		t.Errorf("sentinel errors took %s: retried", d)
	}
	release()
	if _, err := kblob.NewStorage(ctx, st.ConnectionInfo(), false); err == nil {
		t.Errorf("a released handle still opens")
	}
}

// sliceBytes is kopia's blob.Bytes over a string.
type sliceBytes string

func (s sliceBytes) WriteTo(w io.Writer) (int64, error) {
	n, err := io.WriteString(w, string(s))
	return int64(n), err
}
func (s sliceBytes) Length() int               { return len(s) }
func (s sliceBytes) Reader() io.ReadSeekCloser { return nopCloser{strings.NewReader(string(s))} }

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

// outBuf is kopia's blob.OutputBuffer.
type outBuf struct{ bytes.Buffer }

func (b *outBuf) Length() int { return b.Len() }

// TestListDuringWrites: on file://, gocloud's listing reads a folder and
// then stats each entry, so a staging file another writer renames away in
// between failed the whole listing with NotFound (CI: two maintenance
// runs, "lstat .../ferry-maintenance-lock-...tmp: no such file or
// directory"). Listing goes on through it.
func TestListDuringWrites(t *testing.T) {
	loc, dir := openTestStore(t)
	st, release := newBucketStorage(loc.Bucket(), "volumes/", loc.URL(), "h-"+t.Name())
	defer release()
	st.dir = dir + "/"
	ctx := context.Background()
	for i := range 50 {
		if err := st.PutBlob(ctx, kblob.ID(fmt.Sprintf("p%03d", i)), sliceBytes("x"), kblob.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := filepath.Join(dir, "volumes", fmt.Sprintf("q%d.%x.tmp", i%4, i))
			_ = os.WriteFile(p, []byte("partial"), 0o644)
			_ = os.Remove(p)
		}
	}()
	defer func() { close(stop); <-done }()
	deadline := time.Now().Add(2 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		count := 0
		if err := st.ListBlobs(ctx, "", func(kblob.Metadata) error { count++; return nil }); err != nil {
			t.Fatalf("listing %d: %v", n, err)
		}
		if count != 50 {
			t.Fatalf("listing %d: %d blobs, want 50", n, count)
		}
	}
}
