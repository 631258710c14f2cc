package store

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/option"
)

// openGCS opens a gs:// location with ferry's endpoint query parameter or
// credentials of WithCredentials; without either, Open leaves it to
// gocloud.dev's opener (Application Default Credentials, and
// STORAGE_EMULATOR_HOST for an emulator).
//
// endpoint=http(s)://host:port sends the JSON API to that server (a GCS
// emulator, a private endpoint) for this location only, from wherever it
// is opened (helper pods too), and reads through the JSON API
// (storage.WithJSONReads) rather than the XML API, which emulators serve
// only under their public host name. Without EnvGoogleCredentialsJSON the
// client is unauthenticated. EnvGoogleCredentialsJSON is a service-account
// key JSON; its tokens are asked for with the read-write storage scope.
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
	if strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("a gs URL names a bucket, not a folder: use gs://%s?prefix=%s/ for a key prefix", u.Host, strings.Trim(u.Path, "/"))
	}
	client := gcp.NewAnonymousHTTPClient(gcp.DefaultTransport())
	if js := creds[EnvGoogleCredentialsJSON]; js != "" {
		c, err := google.CredentialsFromJSONWithType(ctx, []byte(js), google.ServiceAccount, storage.ScopeReadWrite)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvGoogleCredentialsJSON, err)
		}
		if client, err = gcp.NewHTTPClient(gcp.DefaultTransport(), c.TokenSource); err != nil {
			return nil, err
		}
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
