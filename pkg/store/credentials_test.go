package store_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
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
	if err == nil || !strings.Contains(err.Error(), "access denied") || !strings.Contains(err.Error(), store.EnvAWSAccessKeyID) {
		t.Errorf("wrong secret: %v, want access denied naming %s", err, store.EnvAWSAccessKeyID)
	}
	for _, c := range []struct {
		url   string
		creds map[string]string
		want  string
	}{
		{"file://" + t.TempDir(), map[string]string{store.EnvAWSAccessKeyID: "a", store.EnvAWSSecretAccessKey: "b"}, "not used by file:// locations"},
		{url, map[string]string{"AWS_SECRET": "x"}, `credential key "AWS_SECRET"`},
		{url, map[string]string{store.EnvAWSAccessKeyID: "a"}, "go together"},
	} {
		if _, err := store.Open(ctx, c.url, store.WithCredentials(c.creds)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s, %v) = %v, want %q", c.url, c.creds, err, c.want)
		}
	}
}

// Azure credentials of WithCredentials, against Azurite (which checks
// shared-key signatures): the account and key, or a connection string,
// open the container with nothing in the environment; a wrong key is
// "access denied" naming Azure's credential keys, not "not found".
func TestAzureCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Azurite")
	}
	ctx := context.Background()
	a, err := testenv.StartAzurite(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CreateContainer(ctx, "creds"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_SAS_TOKEN"} {
		t.Setenv(k, "")
	}
	url := a.URL("creds") + "&prefix=p/"
	for _, creds := range []map[string]string{a.Credentials(), {store.EnvAzureStorageConnectionString: a.ConnectionString()}} {
		loc, err := store.Open(ctx, url, store.WithCredentials(creds))
		if err != nil && creds[store.EnvAzureStorageConnectionString] != "" {
			// The connection string names the endpoint: no query but prefix.
			loc, err = store.Open(ctx, "azblob://creds?prefix=p/", store.WithCredentials(creds))
		}
		if err != nil {
			t.Fatalf("right credentials %v: %v", keys(creds), err)
		}
		if err := loc.Bucket().WriteAll(ctx, "x", []byte("x"), nil); err != nil {
			t.Fatalf("write with %v: %v", keys(creds), err)
		}
		loc.Close()
	}
	wrong := a.Credentials()
	wrong[store.EnvAzureStorageKey] = base64.StdEncoding.EncodeToString([]byte("not the key"))
	_, err = store.Open(ctx, url, store.WithCredentials(wrong))
	if err == nil || !strings.Contains(err.Error(), "access denied") || !strings.Contains(err.Error(), store.EnvAzureStorageKey) || strings.Contains(err.Error(), "not found") {
		t.Errorf("wrong key: %v, want access denied naming %s", err, store.EnvAzureStorageKey)
	}
	if _, err := store.Open(ctx, url, store.WithCredentials(map[string]string{store.EnvAzureStorageConnectionString: a.ConnectionString()})); err == nil || !strings.Contains(err.Error(), "connection string names the endpoint") {
		t.Errorf("connection string with domain= in the URL: %v", err)
	}
}

// GCS: ferry's endpoint parameter reaches fake-gcs-server without
// credentials (unauthenticated) and with a service-account key, whose
// token is fetched from its token_uri; STORAGE_EMULATOR_HOST still works
// for a plain gs:// URL. A key whose token exchange is refused is "access
// denied" naming GOOGLE_APPLICATION_CREDENTIALS_JSON.
//
// fake-gcs-server does not authenticate at all, so the refusal is the
// closest real thing: the OAuth token exchange of a service-account key,
// against a loopback token endpoint that answers as Google's does for a
// deleted or unknown key (400 invalid_grant "Invalid JWT Signature.").
func TestGCSCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fake-gcs-server")
	}
	ctx := context.Background()
	g, err := testenv.StartGCS(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CreateBucket(ctx, "creds"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	// A key file named but missing is refused, not ignored (it was, with
	// endpoint=: a new user's finding).
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent")
	if _, err := store.Open(ctx, g.URL("creds")+"&prefix=p/"); err == nil || !strings.Contains(err.Error(), "GOOGLE_APPLICATION_CREDENTIALS: open /nonexistent") {
		t.Errorf("endpoint, a missing key file: %v", err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	loc, err := store.Open(ctx, g.URL("creds")+"&prefix=p/")
	if err != nil {
		t.Fatalf("endpoint, no credentials: %v", err)
	}
	if err := loc.Bucket().WriteAll(ctx, "x", []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	loc.Close()
	tokens := &tokenServer{}
	srv := httptest.NewServer(tokens)
	defer srv.Close()
	key := serviceAccountKey(t, srv.URL+"/token")
	loc, err = store.Open(ctx, g.URL("creds"), store.WithCredentials(map[string]string{store.EnvGoogleCredentialsJSON: key}))
	if err != nil {
		t.Fatalf("service-account key: %v", err)
	}
	if got, err := loc.Bucket().ReadAll(ctx, "p/x"); err != nil || string(got) != "hello" {
		t.Fatalf("read p/x with a key: %q, %v", got, err)
	}
	loc.Close()
	if tokens.calls.Load() == 0 {
		t.Error("the service-account key was not used: no token was asked for")
	}
	tokens.refuse.Store(true)
	_, err = store.Open(ctx, g.URL("creds"), store.WithCredentials(map[string]string{store.EnvGoogleCredentialsJSON: serviceAccountKey(t, srv.URL+"/token")}))
	if err == nil || !strings.Contains(err.Error(), "access denied") || !strings.Contains(err.Error(), store.EnvGoogleCredentialsJSON) {
		t.Errorf("refused key: %v, want access denied naming %s", err, store.EnvGoogleCredentialsJSON)
	}
	// The CLI and helper pods give the key through the environment.
	t.Setenv(store.EnvGoogleCredentialsJSON, serviceAccountKey(t, srv.URL+"/token"))
	if _, err = store.Open(ctx, g.URL("creds")); err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Errorf("refused key in the environment: %v, want access denied", err)
	}
	t.Setenv(store.EnvGoogleCredentialsJSON, "")
	for _, kv := range g.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	loc, err = store.Open(ctx, "gs://creds?prefix=p/")
	if err != nil {
		t.Fatalf("STORAGE_EMULATOR_HOST: %v", err)
	}
	if got, err := loc.Bucket().ReadAll(ctx, "x"); err != nil || string(got) != "hello" {
		t.Fatalf("read x through STORAGE_EMULATOR_HOST: %q, %v", got, err)
	}
	loc.Close()
}

// Misuse of WithCredentials is refused before any request, naming the key.
func TestCredentialMisuse(t *testing.T) {
	ctx := context.Background()
	s3 := "s3://b?endpoint=http://127.0.0.1:1&use_path_style=true&region=us-east-1"
	az := "azblob://c?protocol=http&domain=127.0.0.1:1&localemu=true"
	gs := "gs://b?endpoint=http://127.0.0.1:1"
	for _, c := range []struct {
		url   string
		creds map[string]string
		want  string
	}{
		{"file://" + t.TempDir(), map[string]string{store.EnvAWSAccessKeyID: "a", store.EnvAWSSecretAccessKey: "b"}, "not used by file:// locations"},
		{s3, map[string]string{"AWS_SECRET": "x"}, `credential key "AWS_SECRET" is not used by s3://`},
		{s3, map[string]string{store.EnvAWSAccessKeyID: "a"}, "go together"},
		{s3, map[string]string{store.EnvAzureStorageKey: "a"}, `credential key "AZURE_STORAGE_KEY" is for azblob:// locations, not s3://`},
		{az, map[string]string{store.EnvAWSAccessKeyID: "a", store.EnvAWSSecretAccessKey: "b"}, `credential key "AWS_ACCESS_KEY_ID" is for s3:// locations`},
		{az, map[string]string{store.EnvAzureStorageAccount: "a"}, "AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY go together"},
		{az, map[string]string{store.EnvAzureStorageKey: "a"}, "AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY go together"},
		{az, map[string]string{store.EnvAzureStorageConnectionString: "x", store.EnvAzureStorageAccount: "a"}, "give one or the other"},
		{gs, map[string]string{store.EnvAzureStorageConnectionString: "x"}, `credential key "AZURE_STORAGE_CONNECTION_STRING" is for azblob://`},
		{gs, map[string]string{store.EnvGoogleCredentialsJSON: "{}"}, "GOOGLE_APPLICATION_CREDENTIALS_JSON: "},
		{gs + "&anonymous=true", nil, "query parameter anonymous"},
		{"gs://b?endpoint=ftp://x", nil, `endpoint="ftp://x"`},
		{az + "&storage_account=other", map[string]string{store.EnvAzureStorageAccount: "a", store.EnvAzureStorageKey: "a2V5"}, "storage_account"},
	} {
		if _, err := store.Open(ctx, c.url, store.WithCredentials(c.creds)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s, %v) = %v, want %q", c.url, keys(c.creds), err, c.want)
		}
	}
	if got := store.CredentialKeys("azblob"); strings.Join(got, ",") != "AZURE_STORAGE_ACCOUNT,AZURE_STORAGE_KEY,AZURE_STORAGE_CONNECTION_STRING" {
		t.Errorf("CredentialKeys(azblob) = %v", got)
	}
	if got := store.CredentialKeys("gs"); len(got) != 1 || got[0] != store.EnvGoogleCredentialsJSON {
		t.Errorf("CredentialKeys(gs) = %v", got)
	}
	if got := store.CredentialKeys("file"); got != nil {
		t.Errorf("CredentialKeys(file) = %v, want none", got)
	}
	// Empty values are absent: a CLI passes its environment as it is.
	loc, err := store.Open(ctx, "file://"+t.TempDir(), store.WithCredentials(map[string]string{store.EnvAWSAccessKeyID: ""}))
	if err != nil {
		t.Fatalf("empty credential values: %v", err)
	}
	loc.Close()
}

// keys lists a credential map's keys, not its secrets.
func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// tokenServer is an OAuth token endpoint: it grants a token, or refuses
// every grant as Google's does for a key it does not know.
type tokenServer struct {
	calls  atomic.Int64
	refuse atomic.Bool
}

func (s *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	w.Header().Set("Content-Type", "application/json")
	if s.refuse.Load() {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
		return
	}
	fmt.Fprint(w, `{"access_token":"ya29.test","token_type":"Bearer","expires_in":3600}`)
}

// serviceAccountKey returns a service-account key JSON with a fresh RSA key
// whose tokens come from tokenURI.
func serviceAccountKey(t *testing.T, tokenURI string) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "ferry-test", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "ferry@ferry-test.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURI,
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}
