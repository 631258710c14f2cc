package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// Credential keys WithCredentials accepts for s3:// locations: the names of
// the AWS SDK's environment variables, which is also what a location's
// credential Secret holds in server mode.
const (
	EnvAWSAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvAWSSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvAWSSessionToken    = "AWS_SESSION_TOKEN"
	EnvAWSRegion          = "AWS_REGION"
)

// Credential keys for azblob:// locations: a storage account and its
// shared key, or a connection string (the Azure SDK's variable names).
const (
	EnvAzureStorageAccount          = "AZURE_STORAGE_ACCOUNT"
	EnvAzureStorageKey              = "AZURE_STORAGE_KEY"
	EnvAzureStorageConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
)

// EnvGoogleCredentialsJSON is the credential key for gs:// locations: the
// content (not the path) of a service-account key JSON file.
const EnvGoogleCredentialsJSON = "GOOGLE_APPLICATION_CREDENTIALS_JSON"

// credentialKeys lists the keys each scheme takes, in documentation order.
var credentialKeys = map[string][]string{
	"s3":     {EnvAWSAccessKeyID, EnvAWSSecretAccessKey, EnvAWSSessionToken, EnvAWSRegion},
	"azblob": {EnvAzureStorageAccount, EnvAzureStorageKey, EnvAzureStorageConnectionString},
	"gs":     {EnvGoogleCredentialsJSON},
}

// CredentialKeys returns the credential keys WithCredentials accepts for
// locations of scheme ("s3", "azblob", "gs"; nil for file, mem and others):
// what a CLI collects from its environment for helper pods. The slice is a
// copy.
func CredentialKeys(scheme string) []string {
	return slices.Clone(credentialKeys[scheme])
}

// OpenOption configures Open.
type OpenOption func(*openOptions)

type openOptions struct {
	credentials map[string]string
}

// WithCredentials makes Open use these credentials instead of the process
// environment's. Keys (CredentialKeys) are per scheme:
//
//   - s3://: EnvAWSAccessKeyID with EnvAWSSecretAccessKey, optional
//     EnvAWSSessionToken and EnvAWSRegion (the region used when the URL has
//     none);
//   - azblob://: EnvAzureStorageAccount with EnvAzureStorageKey (a shared
//     key), or EnvAzureStorageConnectionString;
//   - gs://: EnvGoogleCredentialsJSON, a service-account key JSON.
//
// Keys with an empty value count as absent; an empty map is no
// credentials. Open refuses, naming the key, an unknown key, a key of
// another scheme, credentials for a scheme that takes none (file://), half
// of a pair, and both forms of Azure credentials at once.
func WithCredentials(env map[string]string) OpenOption {
	return func(o *openOptions) {
		o.credentials = map[string]string{}
		for k, v := range env {
			if v != "" {
				o.credentials[k] = v
			}
		}
	}
}

// CheckURLCredentials checks that creds are credentials of the location at
// locationURL: each key is one of CredentialKeys of its scheme, and
// CheckCredentials holds. For `ferry install` and the hub, before a
// credential the store would refuse is rendered or used.
// Errors name the key and the scheme, and the keys the scheme takes.
func CheckURLCredentials(locationURL string, creds map[string]string) error {
	u, err := url.Parse(locationURL)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("location URL %q: not a URL", Redact(locationURL))
	}
	want := CredentialKeys(u.Scheme)
	if len(want) == 0 && len(creds) > 0 {
		return fmt.Errorf("a %s:// location takes no credentials", u.Scheme)
	}
	keys := make([]string, 0, len(creds))
	for k := range creds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(want, k) {
			return fmt.Errorf("credential key %s is not used by %s:// locations (they take %s)", k, u.Scheme, strings.Join(want, ", "))
		}
	}
	// Half pairs and both Azure forms at once, which the server's store
	// would refuse when it opens the location.
	return CheckCredentials(u.Scheme, creds)
}

// CheckCredentials checks creds for a location of scheme as Open does
// (WithCredentials): the keys the scheme takes, pairs complete, one
// Azure form.
func CheckCredentials(scheme string, creds map[string]string) error {
	o := openOptions{credentials: creds}
	return o.check(scheme)
}

func (o *openOptions) check(scheme string) error {
	if len(o.credentials) == 0 {
		return nil
	}
	var keys []string
	for k := range o.credentials {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := credentialKeys[scheme]
	if want == nil {
		return fmt.Errorf("credentials (%s) are not used by %s:// locations; only s3://, azblob:// and gs:// locations take credentials", strings.Join(keys, ", "), scheme)
	}
	for _, k := range keys {
		if slices.Contains(want, k) {
			continue
		}
		for other, otherKeys := range credentialKeys {
			if slices.Contains(otherKeys, k) {
				return fmt.Errorf("credential key %q is for %s:// locations, not %s:// ones (want %s)", k, other, scheme, strings.Join(want, ", "))
			}
		}
		return fmt.Errorf("credential key %q is not used by %s:// locations (want %s)", k, scheme, strings.Join(want, ", "))
	}
	c := o.credentials
	switch scheme {
	case "s3":
		if (c[EnvAWSAccessKeyID] == "") != (c[EnvAWSSecretAccessKey] == "") {
			return fmt.Errorf("credentials: %s and %s go together", EnvAWSAccessKeyID, EnvAWSSecretAccessKey)
		}
	case "azblob":
		if c[EnvAzureStorageConnectionString] != "" {
			if c[EnvAzureStorageAccount] != "" || c[EnvAzureStorageKey] != "" {
				return fmt.Errorf("credentials: %s replaces %s and %s: give one or the other", EnvAzureStorageConnectionString, EnvAzureStorageAccount, EnvAzureStorageKey)
			}
		} else if c[EnvAzureStorageAccount] == "" || c[EnvAzureStorageKey] == "" {
			return fmt.Errorf("credentials: %s and %s go together", EnvAzureStorageAccount, EnvAzureStorageKey)
		}
	}
	return nil
}

// CheckIdentity checks that creds, complete for scheme (CheckCredentials),
// also say whom the store is reached as, so that nothing falls back to
// the process's own: for s3 an access key, for azblob an account key or a
// connection string, for gs a service-account key (not an external
// account, whose JSON names files and URLs the process would read). The
// hub checks a Credential so: what a team gives stands alone.
func CheckIdentity(scheme string, creds map[string]string) error {
	switch scheme {
	case "s3":
		if creds[EnvAWSAccessKeyID] == "" {
			return fmt.Errorf("no %s and %s: without them the store is reached with the process's own AWS credentials", EnvAWSAccessKeyID, EnvAWSSecretAccessKey)
		}
	case "azblob":
		if creds[EnvAzureStorageConnectionString] == "" && creds[EnvAzureStorageKey] == "" {
			return fmt.Errorf("no %s with %s, nor %s: without them the store is reached with the process's own Azure credentials", EnvAzureStorageAccount, EnvAzureStorageKey, EnvAzureStorageConnectionString)
		}
	case "gs":
		var key struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(creds[EnvGoogleCredentialsJSON]), &key); err != nil || creds[EnvGoogleCredentialsJSON] == "" {
			return fmt.Errorf("%s is not a service-account key JSON", EnvGoogleCredentialsJSON)
		}
		if key.Type != "service_account" {
			return fmt.Errorf("%s is of type %q: only a service-account key (type service_account) is taken", EnvGoogleCredentialsJSON, key.Type)
		}
	}
	return nil
}

// credentialHint names the credentials of scheme for an access-denied
// error.
func credentialHint(scheme string) string {
	switch scheme {
	case "s3":
		return EnvAWSAccessKeyID + "/" + EnvAWSSecretAccessKey + ", or the AWS SDK's credential chain"
	case "azblob":
		return EnvAzureStorageAccount + "/" + EnvAzureStorageKey + " or " + EnvAzureStorageConnectionString + ", or the Azure SDK's default credential"
	case "gs":
		return EnvGoogleCredentialsJSON + ", or Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS)"
	}
	return "the provider's credentials"
}

// EnvCredentials are the credentials of the location at locURL in this
// process's environment, under the keys of its scheme
// (CredentialKeys), for helper pods, which cannot read it: for s3 the AWS_* variables, or
// else the keys the AWS SDK's chain resolves (a shared credentials file, a
// profile, SSO); for azblob the AZURE_STORAGE_* variables; for gs
// $GOOGLE_APPLICATION_CREDENTIALS_JSON, or else the content of the key
// file $GOOGLE_APPLICATION_CREDENTIALS names. The error says why there are
// none (the map still holds what was found).
func EnvCredentials(ctx context.Context, locURL string) (map[string]string, error) {
	scheme, _, _ := strings.Cut(locURL, ":")
	creds := map[string]string{}
	for _, k := range CredentialKeys(scheme) {
		if v := os.Getenv(k); v != "" {
			creds[k] = v
		}
	}
	switch scheme {
	case "s3":
		if creds[EnvAWSAccessKeyID] == "" {
			return creds, sdkCredentials(ctx, creds)
		}
	case "gs":
		if creds[EnvGoogleCredentialsJSON] == "" {
			file := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS")
			if file == "" {
				return creds, fmt.Errorf("neither $%s nor $GOOGLE_APPLICATION_CREDENTIALS (a service-account key file) is set", EnvGoogleCredentialsJSON)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return creds, fmt.Errorf("$GOOGLE_APPLICATION_CREDENTIALS: %w", err)
			}
			creds[EnvGoogleCredentialsJSON] = string(data)
		}
	}
	return creds, nil
}

// sdkCredentials fills creds with the AWS SDK's default credentials, as
// this process resolves them.
func sdkCredentials(ctx context.Context, creds map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	c, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("no AWS credentials in this process's environment or configuration: %w", err)
	}
	creds[EnvAWSAccessKeyID], creds[EnvAWSSecretAccessKey], creds[EnvAWSSessionToken] = c.AccessKeyID, c.SecretAccessKey, c.SessionToken
	if creds[EnvAWSRegion] == "" && cfg.Region != "" {
		creds[EnvAWSRegion] = cfg.Region
	}
	return nil
}
