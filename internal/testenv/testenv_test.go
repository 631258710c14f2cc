package testenv

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestClusters starts two clusters and checks independence, KCM, the
// kubeconfig files and Apply on real test input.
func TestClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cs, err := StartNamedClusters(ctx, t, "src", "dst")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("2 clusters started in %s", time.Since(start).Round(time.Millisecond))
	src, dst := clientset(t, cs[0]), clientset(t, cs[1])

	t.Run("independent", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-in-src"}, Data: map[string]string{"k": "v"}}
		if _, err := src.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := dst.CoreV1().ConfigMaps("default").Get(ctx, "only-in-src", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("ConfigMap in dst: want NotFound, got %v", err)
		}
	})

	t.Run("kube-root-ca", func(t *testing.T) {
		poll(ctx, t, 30*time.Second, "ConfigMap default/kube-root-ca.crt", func() (bool, error) {
			_, err := src.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		})
	})

	t.Run("deployment-makes-replicaset", func(t *testing.T) {
		objs, err := Apply(ctx, cs[1].Config, "web", writeFile(t, "deploy.yaml", deploymentYAML))
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 1 || objs[0].GetNamespace() != "web" || objs[0].GetUID() == "" {
			t.Fatalf("Apply returned %d objects, first %v", len(objs), objs)
		}
		poll(ctx, t, 30*time.Second, "ReplicaSet of Deployment web/hello", func() (bool, error) {
			rs, err := dst.AppsV1().ReplicaSets("web").List(ctx, metav1.ListOptions{})
			return err == nil && len(rs.Items) > 0, err
		})
	})

	t.Run("namespace-deletion", func(t *testing.T) {
		if err := dst.CoreV1().Namespaces().Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(ctx, t, 60*time.Second, "namespace web gone", func() (bool, error) {
			_, err := dst.CoreV1().Namespaces().Get(ctx, "web", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	})

	t.Run("kubeconfig", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "both.kubeconfig")
		if err := WriteKubeconfig(path, cs...); err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			for _, f := range []string{path, c.KubeconfigPath} {
				cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
					&clientcmd.ClientConfigLoadingRules{ExplicitPath: f},
					&clientcmd.ConfigOverrides{CurrentContext: c.Name}).ClientConfig()
				if err != nil {
					t.Fatalf("%s context %s: %v", f, c.Name, err)
				}
				kc := kubernetes.NewForConfigOrDie(cfg)
				if _, err := kc.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
					t.Fatalf("%s context %s: %v", f, c.Name, err)
				}
			}
		}
	})

	t.Run("apply-bookinfo", func(t *testing.T) {
		root, err := RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(root, "..", "shared", "testdata", "real", "istio-bookinfo", "bookinfo.yaml")
		objs, err := Apply(ctx, cs[0].Config, "bookinfo", file)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 14 {
			t.Fatalf("created %d objects, want 14", len(objs))
		}
		for _, o := range objs {
			if o.GetNamespace() != "bookinfo" || o.GetUID() == "" {
				t.Errorf("%s %s: namespace %q uid %q", o.GetKind(), o.GetName(), o.GetNamespace(), o.GetUID())
			}
		}
		if _, err := Apply(ctx, cs[0].Config, "bookinfo", file); err == nil {
			t.Error("second Apply of the same file: want AlreadyExists error")
		} else {
			t.Logf("second Apply fails as expected: %v", err)
		}
	})
}

// TestApplyCRD checks that a CRD is Established before its custom resource
// is created, and that awkward YAML (CRLF, comment-only documents, no final
// newline) is accepted.
func TestApplyCRD(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, t, "c0")
	if err != nil {
		t.Fatal(err)
	}
	// The custom resource comes first in the file on purpose.
	objs, err := Apply(ctx, c.Config, "", writeFile(t, "crd.yaml", crdYAML))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	want := []string{"CustomResourceDefinition//widgets.example.com", "Namespace//extra", "Widget/default/w1", "ConfigMap/extra/cm"}
	if len(kinds) != len(want) {
		t.Fatalf("got %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("got %v, want %v", kinds, want)
		}
	}
}

// TestS3 starts versitygw, creates a bucket and writes and reads an object
// through gocloud.dev/blob.
func TestS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBucket(ctx, "ferry-test"); err != nil {
		t.Fatal(err)
	}
	for _, kv := range s.Env() {
		k, v, _ := cutEnv(kv)
		t.Setenv(k, v)
	}
	b, err := blob.OpenBucket(ctx, s.URL("ferry-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAll(ctx, "dir/hello.txt", []byte("hello, ferry"), nil); err != nil {
		t.Fatal(err)
	}
	got, err := b.ReadAll(ctx, "dir/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "hello, ferry" {
		t.Fatalf("read %q", got)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "ferry-test", "dir", "hello.txt")); err != nil {
		t.Errorf("object not in posix backend dir: %v", err)
	}
	// Like a real object store, the server keeps connections open: without
	// --keep-alive versitygw closes each one after a single request, and
	// every read of a restore paid a new TCP connection (through the pod
	// network from a helper pod), which no real store charges.
	var reused, fresh int
	trace := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		if ci.Reused {
			reused++
		} else {
			fresh++
		}
	}})
	for i := 0; i < 5; i++ {
		if _, err := b.ReadAll(trace, "dir/hello.txt"); err != nil {
			t.Fatal(err)
		}
	}
	if reused < 4 {
		t.Errorf("5 sequential reads used %d new and %d reused connections: the server closes connections after each request", fresh, reused)
	}
}

// TestReadManifests checks YAML splitting without a cluster.
func TestReadManifests(t *testing.T) {
	objs, err := readManifests(writeFile(t, "crd.yaml", crdYAML))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 4 {
		t.Fatalf("crd.yaml: %d objects, want 4", len(objs))
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err = readManifests(filepath.Join(root, "..", "shared", "testdata", "real", "istio-bookinfo", "bookinfo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 14 {
		t.Fatalf("bookinfo.yaml: %d objects, want 14", len(objs))
	}
	list := "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n"
	objs, err = readManifests(writeFile(t, "list.yaml", list))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[1].GetKind() != "Secret" {
		t.Fatalf("list.yaml: got %v", objs)
	}
}

// TestAzurite starts Azurite's blob service, creates a container, writes
// and reads an object through gocloud.dev/blob with the development
// account's shared key, and sees a wrong key refused: Azurite checks
// shared-key signatures, so the wrong-credential tests mean something.
func TestAzurite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := StartAzurite(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CreateContainer(ctx, "ferry-test"); err != nil {
		t.Fatal(err)
	}
	for _, kv := range a.Env() {
		k, v, _ := cutEnv(kv)
		t.Setenv(k, v)
	}
	roundTrip(ctx, t, a.URL("ferry-test"))
	if a.NodeEndpoint != "" {
		if err := setupHostNet(); err != nil { // HostIP on lo, as for nodes
			t.Fatal(err)
		}
		roundTrip(ctx, t, a.NodeURL("ferry-test"))
	}
	// gocloud's azblob opener reads the environment once per process, so
	// the wrong key goes through the SDK directly.
	// Azure itself answers 403 AuthenticationFailed; Azurite 403
	// AuthorizationFailure.
	if err := wrongKeyContainer(ctx, a); err == nil || !strings.Contains(err.Error(), "RESPONSE 403") {
		t.Errorf("creating a container with a wrong key: %v, want 403", err)
	}
}

// TestGCS starts fake-gcs-server, creates a bucket, and writes and reads an
// object through gocloud.dev/blob with STORAGE_EMULATOR_HOST, one large
// enough for a resumable upload (which continues at the server's
// -external-url).
func TestGCS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := StartGCS(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CreateBucket(ctx, "ferry-test"); err != nil {
		t.Fatal(err)
	}
	if err := g.CreateBucket(ctx, "ferry-test"); err == nil {
		t.Error("creating the bucket twice succeeded")
	}
	for _, kv := range g.Env() {
		k, v, _ := cutEnv(kv)
		t.Setenv(k, v)
	}
	b := roundTrip(ctx, t, "gs://ferry-test")
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB + the 1 MiB chunk: resumable
	if err := b.WriteAll(ctx, "big", big, &blob.WriterOptions{BufferSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReadAll(ctx, "big"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read back %d bytes, %v; want %d", len(got), err, len(big))
	}
	if _, err := os.Stat(filepath.Join(g.Dir, "ferry-test")); err != nil {
		t.Errorf("bucket not in the filesystem backend: %v", err)
	}
}

// roundTrip opens url, writes an object and reads it back.
func roundTrip(ctx context.Context, t *testing.T, url string) *blob.Bucket {
	t.Helper()
	b, err := blob.OpenBucket(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.WriteAll(ctx, "dir/hello.txt", []byte("hello, ferry"), nil); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	got, err := b.ReadAll(ctx, "dir/hello.txt")
	if err != nil || string(got) != "hello, ferry" {
		t.Fatalf("%s: read %q, %v", url, got, err)
	}
	return b
}

// wrongKeyContainer tries to create a container with a key that is not
// the development account's.
func wrongKeyContainer(ctx context.Context, a *Azurite) error {
	cred, err := azblob.NewSharedKeyCredential(AzuriteAccount, base64.StdEncoding.EncodeToString([]byte("not the key")))
	if err != nil {
		return err
	}
	c, err := container.NewClientWithSharedKeyCredential(a.Endpoint+"/"+AzuriteAccount+"/wrong", cred, nil)
	if err != nil {
		return err
	}
	_, err = c.Create(ctx, nil)
	return err
}
