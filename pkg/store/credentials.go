package store

import (
	"fmt"
	"sort"
	"strings"
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

// OpenOption configures Open.
type OpenOption func(*openOptions)

type openOptions struct {
	credentials map[string]string
}

// WithCredentials makes Open use these credentials instead of the process
// environment's. Keys are the AWS SDK's variable names (EnvAWSAccessKeyID,
// EnvAWSSecretAccessKey, optional EnvAWSSessionToken and EnvAWSRegion, the
// region used when the URL has none). Only s3:// locations take them; Open
// refuses them for other schemes, and refuses unknown keys or an access key
// without its secret, naming the key. An empty map is no credentials.
func WithCredentials(env map[string]string) OpenOption {
	return func(o *openOptions) { o.credentials = env }
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
	if scheme != "s3" {
		return fmt.Errorf("credentials (%s) are supported for s3:// locations only; a %s:// location uses the server's environment or workload identity", strings.Join(keys, ", "), scheme)
	}
	for _, k := range keys {
		switch k {
		case EnvAWSAccessKeyID, EnvAWSSecretAccessKey, EnvAWSSessionToken, EnvAWSRegion:
		default:
			return fmt.Errorf("credential key %q is not used by s3:// locations (want %s, %s, and optionally %s, %s)", k, EnvAWSAccessKeyID, EnvAWSSecretAccessKey, EnvAWSSessionToken, EnvAWSRegion)
		}
	}
	if (o.credentials[EnvAWSAccessKeyID] == "") != (o.credentials[EnvAWSSecretAccessKey] == "") {
		return fmt.Errorf("credentials: %s and %s go together", EnvAWSAccessKeyID, EnvAWSSecretAccessKey)
	}
	return nil
}
