package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/store"
)

// WithCredentials replaces the environment's credentials: with none in the
// environment the right ones open the bucket, a wrong secret is "access
// denied", and misuse is refused before any request.
func TestWithCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts versitygw")
	}
	ctx := context.Background()
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.CreateBucket(ctx, "creds"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	url := s3.URL("creds")
	loc, err := store.Open(ctx, url, store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey}))
	if err != nil {
		t.Fatalf("right credentials: %v", err)
	}
	loc.Close()
	_, err = store.Open(ctx, url, store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: "wrong"}))
	if err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Errorf("wrong secret: %v, want access denied", err)
	}
	for _, c := range []struct {
		url   string
		creds map[string]string
		want  string
	}{
		{"file://" + t.TempDir(), map[string]string{store.EnvAWSAccessKeyID: "a", store.EnvAWSSecretAccessKey: "b"}, "s3:// locations only"},
		{url, map[string]string{"AWS_SECRET": "x"}, `credential key "AWS_SECRET"`},
		{url, map[string]string{store.EnvAWSAccessKeyID: "a"}, "go together"},
	} {
		if _, err := store.Open(ctx, c.url, store.WithCredentials(c.creds)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s, %v) = %v, want %q", c.url, c.creds, err, c.want)
		}
	}
}
