// Package store is ferry's backup storage location: a gocloud.dev/blob
// bucket (file://, s3://, gs://, azblob://, mem://) with ferry's key layout
// (docs/design.md#the-store-layout) on top.
//
// Layout under the location's prefix:
//
//	backups/<name>/ferry-backup-started.json  written FIRST: the Backup, phase InProgress
//	backups/<name>/<name>.tar.gz              the archive
//	backups/<name>/<name>-results.json.gz     per-item results
//	backups/<name>/ferry-backup.json          written LAST: the commit marker
//	restores/<name>/ferry-restore.json        the Restore, written when it ends
//	restores/<name>/<name>-results.json.gz    per-item results of the restore
//
// A backup whose ferry-backup.json is missing is Incomplete: it is listed as
// such and is never restorable.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"gocloud.dev/blob"
	// Drivers for the URL schemes a location may use.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
)

// EnvStorage names the environment variable that selects the location when
// none is given.
const EnvStorage = "FERRY_STORAGE"

// ErrNotFound is returned (wrapped) when a backup or restore does not exist
// in the location.
var ErrNotFound = errors.New("not found")

// ErrIncomplete is returned (wrapped) when a backup exists but was never
// committed: its ferry-backup.json is missing.
var ErrIncomplete = errors.New("incomplete: the backup was interrupted before it was committed")

// Location is an open backup storage location.
type Location struct {
	url    string
	bucket *blob.Bucket
	enc    *Encryption
}

// DefaultURL is file://$XDG_DATA_HOME/ferry, or file://~/.local/share/ferry.
func DefaultURL() string {
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return "file://" + filepath.Join(dir, "ferry")
}

// Open opens the location at rawURL and checks that it is reachable with
// the credentials in the environment (or those of WithCredentials; for a
// gs:// location EnvGoogleCredentialsJSON is read from the environment
// too, as no Google library does). Errors
// name the location (without credentials) and say whether the cause is
// access, absence or the URL. file:// locations are created if missing.
func Open(ctx context.Context, rawURL string, opts ...OpenOption) (*Location, error) {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	if rawURL == "" {
		rawURL = DefaultURL()
	}
	if o.credentials == nil && strings.HasPrefix(rawURL, "gs:") && os.Getenv(EnvGoogleCredentialsJSON) != "" {
		// ferry's own variable, which no Google library reads: the CLI's
		// and the helper pods' way to give a key's content.
		o.credentials = map[string]string{EnvGoogleCredentialsJSON: os.Getenv(EnvGoogleCredentialsJSON)}
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("backup storage location %q: not a URL (want file:///dir, s3://bucket?..., gs://, azblob://, mem://)", rawURL)
	}
	openURL := rawURL
	if err := checkURL(u); err != nil {
		return nil, fmt.Errorf("backup storage location %s: %w", Redact(rawURL), err)
	}
	if o.credentials == nil && u.Scheme == "azblob" {
		o.credentials = azureEnvCredentials()
	}
	if u.Scheme == "file" {
		q := u.Query()
		if q.Get("create_dir") == "" {
			q.Set("create_dir", "true")
		}
		// Stage uploads next to their final key, not in $TMPDIR, so that
		// an interrupted backup's partial files are inside its folder:
		// listed as Incomplete and removed by `ferry backup delete`.
		if q.Get("no_tmp_dir") == "" {
			q.Set("no_tmp_dir", "true")
		}
		if _, ok := q["metadata"]; !ok {
			q.Set("metadata", "skip")
		}
		u.RawQuery = q.Encode()
		openURL = u.String()
	}
	if err := o.check(u.Scheme); err != nil {
		return nil, fmt.Errorf("backup storage location %s: %w", Redact(rawURL), err)
	}
	var b *blob.Bucket
	switch {
	case u.Scheme == "s3":
		b, err = openS3(ctx, u, o.credentials)
	case u.Scheme == "azblob" && len(o.credentials) > 0:
		b, err = openAzure(ctx, u, o.credentials)
	case u.Scheme == "gs" && (len(o.credentials) > 0 || u.Query().Has("endpoint") || os.Getenv("STORAGE_EMULATOR_HOST") == ""):
		b, err = openGCS(ctx, u, o.credentials)
	default:
		b, err = blob.OpenBucket(ctx, openURL)
	}
	if err != nil {
		return nil, fmt.Errorf("backup storage location %s: %w", Redact(rawURL), err)
	}
	loc := &Location{url: rawURL, bucket: b}
	if err := loc.Check(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return loc, nil
}

// CheckTimeout bounds Check: a store that accepts connections and never
// answers, or an endpoint that refuses them (which the Google client
// retries without end), is reported unreachable after it.
var CheckTimeout = 30 * time.Second

// Check verifies that the bucket exists and that the credentials may list
// it, within CheckTimeout.
func (l *Location) Check(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	it := l.bucket.List(&blob.ListOptions{Prefix: "backups/", Delimiter: "/"})
	_, err := it.Next(cctx)
	if err == nil || errors.Is(err, errEOF) {
		return nil
	}
	if ctx.Err() == nil && cctx.Err() != nil {
		return fmt.Errorf("backup storage location %s: checking access: unreachable: no answer within %s: %w", Redact(l.url), CheckTimeout, err)
	}
	return l.describe("checking access", err)
}

// describe wraps a storage error with the location and a plain reason.
func (l *Location) describe(op string, err error) error {
	reason := ""
	denied := "access denied: check the credentials (" + credentialHint(l.scheme()) + ")"
	switch {
	case accessDenied(err):
		reason = denied
		var g *googleapi.Error
		if errors.As(err, &g) && g.Code == http.StatusForbidden {
			// GCS answers 403 also for a bucket the identity may not see.
			reason = "access denied (or the bucket does not exist): check the credentials (" + credentialHint("gs") + ")"
		}
	case gcerrors.Code(err) == gcerrors.PermissionDenied:
		reason = denied
	case gcerrors.Code(err) == gcerrors.NotFound:
		reason = "not found: check that the bucket exists"
	case gcerrors.Code(err) == gcerrors.Unknown, gcerrors.Code(err) == gcerrors.Internal:
		s := err.Error()
		switch {
		case strings.Contains(s, "InvalidAccessKeyId"), strings.Contains(s, "XAdminUserNotFound"), strings.Contains(s, "InvalidClientTokenId"), strings.Contains(s, "SignatureDoesNotMatch"), strings.Contains(s, "AccessDenied"), strings.Contains(s, "StatusCode: 403"):
			reason = denied
		case strings.Contains(s, "NoSuchBucket"):
			reason = "not found: check that the bucket exists"
		case strings.Contains(s, "connection refused"), strings.Contains(s, "no such host"), strings.Contains(s, "i/o timeout"):
			reason = "unreachable"
		}
	}
	if reason != "" {
		return fmt.Errorf("backup storage location %s: %s: %s: %w", Redact(l.url), op, reason, err)
	}
	return fmt.Errorf("backup storage location %s: %s: %w", Redact(l.url), op, err)
}

// accessDenied reports whether err is an Azure or Google refusal of the
// credentials: an HTTP 401 or 403 of either SDK (gocloud.dev maps Azure's
// AuthenticationFailed but not Azurite's AuthorizationFailure, and GCS's
// 403 to NotFound), or an OAuth token exchange the token endpoint refused
// (invalid_grant for a revoked or unknown service-account key).
func accessDenied(err error) bool {
	var az *azcore.ResponseError
	if errors.As(err, &az) {
		return az.StatusCode == http.StatusUnauthorized || az.StatusCode == http.StatusForbidden
	}
	var g *googleapi.Error
	if errors.As(err, &g) {
		return g.Code == http.StatusUnauthorized || g.Code == http.StatusForbidden
	}
	var re *oauth2.RetrieveError
	return errors.As(err, &re)
}

// scheme is the URL scheme of the location ("" if unparseable).
func (l *Location) scheme() string {
	if u, err := url.Parse(l.url); err == nil {
		return u.Scheme
	}
	return ""
}

// URL returns the location's URL with any credentials removed.
func (l *Location) URL() string { return Redact(l.url) }

// SecretURL returns the location's URL as it was opened, credentials
// included: for a Secret that lets a helper pod open the same location.
// Never print it.
func (l *Location) SecretURL() string { return l.url }

// Bucket exposes the underlying bucket for packages that stream to it.
func (l *Location) Bucket() *blob.Bucket { return l.bucket }

// Close releases the bucket.
func (l *Location) Close() error { return l.bucket.Close() }

// Redact removes userinfo and secret-looking query parameters from a URL.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable URL>"
	}
	u.User = nil
	q := u.Query()
	for k := range q {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "secret") || strings.Contains(lk, "key") || strings.Contains(lk, "token") || strings.Contains(lk, "password") {
			q.Set(k, "REDACTED")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
