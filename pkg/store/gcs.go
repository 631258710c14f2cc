package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/option"
)

// openGCS opens a gs:// location with the credentials gcsClient finds
// and ferry's endpoint query parameter. Open leaves only a location
// without either to gocloud.dev's opener, when STORAGE_EMULATOR_HOST
// points every gs:// location at an emulator.
//
// endpoint=http(s)://host:port sends the JSON API to that server (a GCS
// emulator, a private endpoint) for this location only, from wherever it
// is opened (helper pods too), and reads through the JSON API
// (storage.WithJSONReads) rather than the XML API, which emulators serve
// only under their public host name. Without a key the client is then
// unauthenticated. EnvGoogleCredentialsJSON is a service-account key JSON;
// its tokens are asked for with the read-write storage scope.
// Only prefix may be in the query beside endpoint.
func openGCS(ctx context.Context, u *url.URL, creds map[string]string) (*blob.Bucket, error) {
	q := u.Query()
	endpoint := q.Get("endpoint")
	q.Del("endpoint")
	prefix := q.Get("prefix")
	q.Del("prefix")
	for k := range q {
		return nil, fmt.Errorf("query parameter %s: with endpoint= or credentials a gs URL takes only endpoint and prefix", k)
	}
	client, err := gcsClient(endpoint != "", creds)
	if err != nil {
		return nil, err
	}
	opts := &gcsblob.Options{}
	if endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, fmt.Errorf("query parameter endpoint=%q: want http(s)://host[:port]", endpoint)
		}
		opts.ClientOptions = []option.ClientOption{option.WithEndpoint(strings.TrimSuffix(endpoint, "/") + "/storage/v1/"), storage.WithJSONReads()}
	}
	b, err := gcsblob.OpenBucket(ctx, client, u.Host, opts)
	if err != nil || prefix == "" {
		return b, err
	}
	return blob.PrefixedBucket(b, prefix), nil
}

// TokenTimeout bounds each OAuth token request of a gs:// location's
// credentials: Google's token source asks without a context, so a token
// endpoint that never answers would hold ferry past any deadline or signal.
const TokenTimeout = 30 * time.Second

// gcsClient is the HTTP client of a gs:// location: with
// EnvGoogleCredentialsJSON, its service-account key; else the key file
// $GOOGLE_APPLICATION_CREDENTIALS names; else, for an endpoint=, none
// (an emulator); else Application Default Credentials (the metadata
// server's workload identity). A missing or unusable key is an error
// naming where it came from, never an anonymous client.
func gcsClient(endpoint bool, creds map[string]string) (*gcp.HTTPClient, error) {
	tctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: TokenTimeout})
	js, from := creds[EnvGoogleCredentialsJSON], EnvGoogleCredentialsJSON
	if js == "" {
		if path := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"); path != "" {
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("GOOGLE_APPLICATION_CREDENTIALS: %w", err)
			}
			js, from = string(data), "GOOGLE_APPLICATION_CREDENTIALS "+path
		}
	}
	var c *google.Credentials
	var err error
	switch {
	case js != "":
		var key struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(js), &key); err != nil {
			return nil, fmt.Errorf("%s: not a JSON key: %w", from, err)
		}
		if c, err = google.CredentialsFromJSONWithType(tctx, []byte(js), google.CredentialsType(key.Type), storage.ScopeReadWrite); err != nil {
			return nil, fmt.Errorf("%s: %w", from, err)
		}
	case endpoint:
		return gcp.NewAnonymousHTTPClient(gcp.DefaultTransport()), nil
	default:
		if c, err = google.FindDefaultCredentials(tctx, storage.ScopeReadWrite); err != nil {
			return nil, fmt.Errorf("no Google credentials: set %s (a service-account key's content) or GOOGLE_APPLICATION_CREDENTIALS (its file), or run with a workload identity: %w", EnvGoogleCredentialsJSON, err)
		}
	}
	return gcp.NewHTTPClient(gcp.DefaultTransport(), c.TokenSource)
}
