package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/store"
)

// TestHelperCredentials: helper pods get the credentials of the location's
// scheme from this process's environment, and no other scheme's; for gs
// the key file $GOOGLE_APPLICATION_CREDENTIALS names, read whole.
func TestHelperCredentials(t *testing.T) {
	ctx := context.Background()
	sa := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(sa, []byte(`{"type": "service_account"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		store.EnvAWSAccessKeyID: "ak", store.EnvAWSSecretAccessKey: "sk", store.EnvAWSSessionToken: "", store.EnvAWSRegion: "eu-west-1",
		store.EnvAzureStorageAccount: "acct", store.EnvAzureStorageKey: "azkey", store.EnvAzureStorageConnectionString: "",
		store.EnvGoogleCredentialsJSON: "", "GOOGLE_APPLICATION_CREDENTIALS": sa,
	} {
		t.Setenv(k, v)
	}
	for scheme, want := range map[string]map[string]string{
		"s3":     {store.EnvAWSAccessKeyID: "ak", store.EnvAWSSecretAccessKey: "sk", store.EnvAWSRegion: "eu-west-1"},
		"azblob": {store.EnvAzureStorageAccount: "acct", store.EnvAzureStorageKey: "azkey"},
		"gs":     {store.EnvGoogleCredentialsJSON: `{"type": "service_account"}`},
	} {
		got, err := store.EnvCredentials(ctx, scheme+"://bucket")
		if err != nil || len(got) != len(want) {
			t.Errorf("%s: EnvCredentials = %v, %v; want %v", scheme, got, err, want)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", scheme, k, got[k], v)
			}
		}
	}
	// $GOOGLE_APPLICATION_CREDENTIALS_JSON wins over the file.
	t.Setenv(store.EnvGoogleCredentialsJSON, `{"type": "service_account", "inline": true}`)
	if got, err := store.EnvCredentials(ctx, "gs://b"); err != nil || !strings.Contains(got[store.EnvGoogleCredentialsJSON], "inline") {
		t.Errorf("gs with $%s: %v, %v", store.EnvGoogleCredentialsJSON, got, err)
	}
	t.Setenv(store.EnvGoogleCredentialsJSON, "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	if _, err := store.EnvCredentials(ctx, "gs://b"); err == nil || !strings.Contains(err.Error(), "$GOOGLE_APPLICATION_CREDENTIALS: open ") {
		t.Errorf("gs with a missing key file: %v", err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	if _, err := store.EnvCredentials(ctx, "gs://b"); err == nil || !strings.Contains(err.Error(), "neither $"+store.EnvGoogleCredentialsJSON) {
		t.Errorf("gs without credentials: %v", err)
	}
}
