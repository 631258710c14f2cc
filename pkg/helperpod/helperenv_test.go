package helperpod

import (
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// TestHelperEnv: a helper pod's Secret holds the location, the password
// and the credentials of the location's scheme only; a location a pod
// cannot reach is refused.
func TestHelperEnv(t *testing.T) {
	creds := map[string]string{
		store.EnvAWSAccessKeyID: "ak", store.EnvAWSSecretAccessKey: "sk", store.EnvAWSSessionToken: "",
		store.EnvAzureStorageAccount: "acct", store.EnvAzureStorageKey: "azkey",
		store.EnvGoogleCredentialsJSON: `{"type": "service_account"}`,
	}
	for u, want := range map[string][]string{
		"s3://b?endpoint=http://10.0.0.1:9000":                         {store.EnvAWSAccessKeyID, store.EnvAWSSecretAccessKey},
		"azblob://c?protocol=http&domain=10.0.0.1:10000&localemu=true": {store.EnvAzureStorageAccount, store.EnvAzureStorageKey},
		"gs://b?endpoint=http://10.0.0.1:4443":                         {store.EnvGoogleCredentialsJSON},
	} {
		env, err := HelperEnv(u, "pw", creds)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if env[store.EnvStorage] != u || env[volumes.EnvPassword] != "pw" || len(env) != 2+len(want) {
			t.Errorf("%s: helper environment has keys %v, want the location, the password and %v", u, keys(env), want)
		}
		for _, k := range want {
			if env[k] != creds[k] {
				t.Errorf("%s: %s = %q, want %q", u, k, env[k], creds[k])
			}
		}
	}
	for u, msg := range map[string]string{
		"file:///tmp/x":                         "cannot reach a file:// location",
		"s3://b?endpoint=http://127.0.0.1:9000": "loopback address",
	} {
		if _, err := HelperEnv(u, "pw", creds); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", u, err, msg)
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
