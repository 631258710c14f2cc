package install

import (
	"context"
	"io"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/kube"
)

// TestApplyReplacesCredentials: applied again with another scheme's
// credentials, Secret ferry-credentials holds only the new keys. With the
// Secret rendered as stringData, server-side apply kept the old keys
// beside the new ones, and the store refused the location for a key of
// another scheme.
func TestApplyReplacesCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx := context.Background()
	c, err := testenv.StartCluster(ctx, t, "install")
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := kube.Connect(ctx, "install", c.Config)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(url string, creds map[string]string) {
		t.Helper()
		objs := Render(Options{Namespace: "ferry", Image: "example.com/ferry:test", LocationURL: url, Credentials: creds, NoNodeAgent: true})
		if err := WithTypeMeta(Scheme(), objs); err != nil {
			t.Fatal(err)
		}
		if err := Apply(ctx, cluster, objs, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	apply("s3://b", map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"})
	apply("azblob://c", map[string]string{"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_KEY": "k"})
	sec, err := cluster.Typed.CoreV1().Secrets("ferry").Get(ctx, CredentialsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := secretKeys(sec); got != "AZURE_STORAGE_ACCOUNT,AZURE_STORAGE_KEY" || string(sec.Data["AZURE_STORAGE_KEY"]) != "k" {
		t.Errorf("Secret %s after the second install has keys %s, want only the azblob ones", CredentialsName, got)
	}
}

func secretKeys(s *corev1.Secret) string {
	var keys []string
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}
