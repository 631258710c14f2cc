package volumes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	kblob "github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/retrying"
)

// maintenanceLockPrefix names the maintenance lock objects,
// volumes/ferry-maintenance-lock-<generation> (no kopia blob ID starts so).
const maintenanceLockPrefix = "ferry-maintenance-lock-"

// maintenanceLockTTL is how long a lock holds without renewal: its holder
// rewrites it every third of that while it runs, so a lock older than
// this was left by a process that died (the stale-lock rule). Clocks of
// the processes must agree to well within it.
var maintenanceLockTTL = 10 * time.Minute

// maintenanceLock is a maintenance lock object's content.
type maintenanceLock struct {
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"`
}

// lockMaintenance takes the repository's maintenance lock, an object in
// the store: kopia's own exclusion (maintenance.RunExclusive) is a file
// lock next to the local config, which every ferry process has apart, and
// all are the same maintenance owner. Locks are numbered: a process reads
// the highest; when it is held (not released, not expired) it returns
// held=true; otherwise it creates the next number create-only (of two
// processes, one gets it) and checks that it is still the highest (a
// process that read an old list may create a number below a newer lock;
// it gives way). The highest lock is never deleted, only marked released,
// so numbers are never reused. unlock marks it released.
func (r *Repository) lockMaintenance(ctx context.Context) (unlock func(), held *maintenanceLock, err error) {
	st := retrying.NewWrapper(r.st)
	n, cur, err := r.highestLock(ctx)
	if err != nil {
		return nil, nil, err
	}
	if cur != nil && time.Now().Before(cur.Expires) {
		return nil, cur, nil
	}
	host, _ := os.Hostname()
	me := maintenanceLock{Owner: fmt.Sprintf("%s pid %d %s", host, os.Getpid(), r.st.handle)}
	id := lockID(n + 1)
	put := func(opts kblob.PutOptions) error {
		data, _ := json.Marshal(me)
		return st.PutBlob(ctx, id, bytesOf(data), opts)
	}
	me.Expires = time.Now().Add(maintenanceLockTTL)
	if err := put(kblob.PutOptions{DoNotRecreate: true}); errors.Is(err, kblob.ErrBlobAlreadyExists) {
		return nil, &maintenanceLock{Owner: "another process (it took " + RepositoryPrefix + string(id) + " first)"}, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("maintenance lock %s%s in %s: %w", RepositoryPrefix, id, r.url, err)
	}
	if top, other, err := r.highestLock(ctx); err != nil || top != n+1 {
		_ = st.DeleteBlob(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		return nil, other, nil
	}
	r.deleteLocksBelow(ctx, n+1)
	renewCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-time.After(maintenanceLockTTL / 3):
				me.Expires = time.Now().Add(maintenanceLockTTL)
				if err := put(kblob.PutOptions{}); err != nil {
					r.log.Warn("renewing the maintenance lock", "location", r.url, "lock", RepositoryPrefix+string(id), "error", err)
				}
			}
		}
	}()
	return func() {
		stop()
		<-done
		me.Expires = time.Time{} // released
		if err := put(kblob.PutOptions{}); err != nil {
			r.log.Warn("releasing the maintenance lock (it expires by itself)", "location", r.url, "lock", RepositoryPrefix+string(id), "error", err)
		}
	}, nil, nil
}

func lockID(n uint64) kblob.ID { return kblob.ID(fmt.Sprintf("%s%020d", maintenanceLockPrefix, n)) }

// highestLock returns the highest lock number (0 if none) and its content
// (nil if none or unreadable: an unreadable lock counts as free).
func (r *Repository) highestLock(ctx context.Context) (uint64, *maintenanceLock, error) {
	var top uint64
	err := r.st.ListBlobs(ctx, maintenanceLockPrefix, func(bm kblob.Metadata) error {
		if n, err := strconv.ParseUint(strings.TrimPrefix(string(bm.BlobID), maintenanceLockPrefix), 10, 64); err == nil && n > top {
			top = n
		}
		return nil
	})
	if err != nil || top == 0 {
		return top, nil, err
	}
	var buf outputBuffer
	if err := retrying.NewWrapper(r.st).GetBlob(ctx, lockID(top), 0, -1, &buf); err != nil {
		if errors.Is(err, kblob.ErrBlobNotFound) {
			return top, nil, nil
		}
		return 0, nil, fmt.Errorf("maintenance lock: %w", err)
	}
	var l maintenanceLock
	if json.Unmarshal(buf.Bytes(), &l) != nil {
		return top, nil, nil
	}
	return top, &l, nil
}

// deleteLocksBelow removes the lock objects numbered below n.
func (r *Repository) deleteLocksBelow(ctx context.Context, n uint64) {
	_ = r.st.ListBlobs(ctx, maintenanceLockPrefix, func(bm kblob.Metadata) error {
		if m, err := strconv.ParseUint(strings.TrimPrefix(string(bm.BlobID), maintenanceLockPrefix), 10, 64); err == nil && m < n {
			_ = r.st.DeleteBlob(ctx, bm.BlobID)
		}
		return nil
	})
}

// byteSlice is a kopia blob.Bytes over one slice.
type byteSlice []byte

func bytesOf(b []byte) byteSlice { return byteSlice(b) }

func (b byteSlice) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}

func (b byteSlice) Length() int { return len(b) }

func (b byteSlice) Reader() io.ReadSeekCloser { return byteSliceReader{bytes.NewReader(b)} }

type byteSliceReader struct{ *bytes.Reader }

func (byteSliceReader) Close() error { return nil }
