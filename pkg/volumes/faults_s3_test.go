package volumes

import (
	"context"
	"fmt"
	"testing"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes/volumetest"
)

// startS3 starts versitygw with bucket, returning it and its URL's opener.
func startS3(t *testing.T, buckets ...string) (*testenv.S3, func(url string) (*store.Location, error)) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts versitygw")
	}
	ctx := context.Background()
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range buckets {
		if err := s3.CreateBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	creds := store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey})
	return s3, func(url string) (*store.Location, error) { return store.Open(ctx, url, creds) }
}

// TestConcurrentCreateS3 is TestConcurrentCreate on S3 (versitygw), whose
// conditional PUT (If-None-Match: *) makes the creation's writes create-only.
func TestConcurrentCreateS3(t *testing.T) {
	var names []string
	for round := range 5 {
		names = append(names, fmt.Sprintf("create-%d", round))
	}
	s3, open := startS3(t, names...)
	for round, b := range names {
		testConcurrentCreate(t, fmt.Sprintf("round %d", round), func() (*store.Location, error) { return open(s3.URL(b)) })
	}
}

// TestConcurrentMaintenanceS3 is TestConcurrentMaintenance on S3.
func TestConcurrentMaintenanceS3(t *testing.T) {
	s3, open := startS3(t, "maintenance")
	testConcurrentMaintenance(t, func(t *testing.T) (func() (*store.Location, error), *store.Location) {
		loc, err := open(s3.URL("maintenance"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { loc.Close() })
		return func() (*store.Location, error) { return open(s3.URL("maintenance")) }, loc
	})
}

// TestFlakyStoreVolumes backs up and restores volume data, and runs
// maintenance, through a proxy that fails 20 % of the S3 requests (503
// or a connection reset) and cuts 5 % of the downloads midway: all
// complete, and the bytes come back. The cut downloads are what the S3
// client's own retries (pkg/store) do not cover.
func TestFlakyStoreVolumes(t *testing.T) {
	ctx := context.Background()
	s3, open := startS3(t, "flaky")
	proxy := testenv.StartFlakyProxy(t, s3.Endpoint, 0.2, 42)
	proxy.CutShare = 0.05
	loc, err := open(proxy.S3URL(s3, "flaky"))
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	src := t.TempDir()
	if _, err := volumetest.MakeTree(src, volumetest.TreeOptions{BigFile: 24 << 20, SmallFiles: 200, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, loc, testPassword, OpenOptions{Create: true})
	if err != nil {
		t.Fatalf("create through the flaky proxy: %v", err)
	}
	defer r.Close(ctx)
	res, err := r.Snapshot(ctx, src, "pvc/ns/flaky", map[string]string{TagBackup: "flaky"}, nil)
	if err != nil {
		t.Fatalf("snapshot through the flaky proxy: %v", err)
	}
	if err := r.Maintain(ctx); err != nil {
		t.Fatalf("maintenance through the flaky proxy: %v", err)
	}
	r2, err := Open(ctx, loc, testPassword, OpenOptions{})
	if err != nil {
		t.Fatalf("open through the flaky proxy: %v", err)
	}
	defer r2.Close(ctx)
	if err := restoreAndCompare(t, r2, res.SnapshotID, src); err != nil {
		t.Fatalf("restore through the flaky proxy: %v", err)
	}
	t.Logf("proxy: %d requests, %d failed on purpose", proxy.Total.Load(), proxy.Injured.Load())
	if proxy.Injured.Load() < 20 {
		t.Fatalf("the proxy failed only %d requests: the test proves little", proxy.Injured.Load())
	}
}
