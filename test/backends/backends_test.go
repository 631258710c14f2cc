package backends

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/store"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// needle is the Secret value the encryption case looks for in the store.
const needle = "ferry-backends-secret-needle-7f3a"

// suite is what every backend's cases share: one pair of API-server-only
// clusters, with namespace shop (3 ConfigMaps, a Secret, a Deployment
// whose image is in registry srcReg), and a target registry.
type suite struct {
	kubeconfig     string
	src, dst       kubernetes.Interface
	srcReg, dstReg *testenv.Registry
}

// backend is one kind of location on its real server.
type backend struct {
	name string
	// base is the location's URL without a prefix.
	base string
	// env is what the ferry process needs to reach it (credentials).
	env []string
	// creds opens it in-process (store.WithCredentials).
	creds map[string]string
	// wrongEnv replaces env with refused credentials; nil for a scheme
	// without credentials. wrongKey is a key the refusal must name.
	wrongEnv []string
	wrongKey string
}

// url is the location's URL under prefix ("" for none).
func (b *backend) url(prefix string) string {
	if prefix == "" {
		return b.base
	}
	sep := "?"
	if strings.Contains(b.base, "?") {
		sep = "&"
	}
	return b.base + sep + "prefix=" + prefix
}

// open opens the location in-process, under prefix.
func (b *backend) open(t *testing.T, prefix string) *store.Location {
	t.Helper()
	loc, err := store.Open(context.Background(), b.url(prefix), store.WithCredentials(b.creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close() })
	return loc
}

// ferry runs ferry on the suite's clusters and this location under prefix.
func (s *suite) ferry(t *testing.T, b *backend, prefix string, args ...string) result {
	t.Helper()
	return ferry(t, b.env, append(args, "--kubeconfig", s.kubeconfig, "--storage", b.url(prefix))...)
}

// TestBackends runs the same cases on every kind of location, the four
// backends in parallel (each has its own server and namespaces).
func TestBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters and object stores")
	}
	s := newSuite(t)
	for _, b := range startBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.run(t, s, b) })
			}
		})
	}
}

func newSuite(t *testing.T) *suite {
	ctx := context.Background()
	cs, err := testenv.StartNamedClusters(ctx, t, "src", "dst")
	if err != nil {
		t.Fatal(err)
	}
	s := &suite{kubeconfig: filepath.Join(t.TempDir(), "kubeconfig"),
		src: kubernetes.NewForConfigOrDie(cs[0].Config), dst: kubernetes.NewForConfigOrDie(cs[1].Config)}
	if err := testenv.WriteKubeconfig(s.kubeconfig, cs...); err != nil {
		t.Fatal(err)
	}
	for _, r := range []**testenv.Registry{&s.srcReg, &s.dstReg} {
		if *r, err = testenv.StartRegistry(ctx, t, testenv.RegistryOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.srcReg.PushImage("shop/app:1", 32<<10, 2); err != nil {
		t.Fatal(err)
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.src.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}))
	for _, n := range []string{"cm-0", "cm-1", "cm-2"} {
		must(s.src.CoreV1().ConfigMaps("shop").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string]string{"k": n}}, metav1.CreateOptions{}))
	}
	must(s.src.CoreV1().Secrets("shop").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sealed"}, StringData: map[string]string{"password": needle}}, metav1.CreateOptions{}))
	labels := map[string]string{"app": "app"}
	must(s.src.AppsV1().Deployments("shop").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: s.srcReg.Host + "/shop/app:1"}}}}}}, metav1.CreateOptions{}))
	return s
}

// startBackends starts the servers and makes one bucket (container) each.
func startBackends(t *testing.T) []*backend {
	ctx := context.Background()
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	gcs, err := testenv.StartGCS(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	az, err := testenv.StartAzurite(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{s3.CreateBucket(ctx, "ferry"), gcs.CreateBucket(ctx, "ferry"), az.CreateContainer(ctx, "ferry")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	wrongGCS := refusedServiceAccount(t)
	return []*backend{
		{name: "file", base: "file://" + filepath.Join(t.TempDir(), "store")},
		{name: "s3", base: s3.URL("ferry"), env: s3.Env(),
			creds:    map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey},
			wrongEnv: append(s3.Env(), store.EnvAWSSecretAccessKey+"=wrong"), wrongKey: store.EnvAWSAccessKeyID},
		// Without credentials ferry's endpoint= client is unauthenticated,
		// as fake-gcs-server wants.
		{name: "gs", base: gcs.URL("ferry"),
			wrongEnv: []string{store.EnvGoogleCredentialsJSON + "=" + wrongGCS}, wrongKey: store.EnvGoogleCredentialsJSON},
		{name: "azblob", base: az.URL("ferry"), env: az.Env(), creds: az.Credentials(),
			wrongEnv: append(az.Env(), store.EnvAzureStorageKey+"="+base64.StdEncoding.EncodeToString([]byte("not the key"))), wrongKey: store.EnvAzureStorageKey},
	}
}

// listed is one item of `ferry backup get -o json`.
type listed struct {
	Metadata struct{ Name string }  `json:"metadata"`
	Status   struct{ Phase string } `json:"status"`
}

// backupGet lists the location's backups through ferry.
func (s *suite) backupGet(t *testing.T, b *backend, prefix string) map[string]string {
	t.Helper()
	r := s.ferry(t, b, prefix, "backup", "get", "-o", "json")
	if r.code != 0 {
		t.Fatalf("backup get: exit %d\n%s", r.code, r.stderr)
	}
	var list struct{ Items []listed }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("backup get output: %v\n%.2000s", err, r.stdout)
	}
	phases := map[string]string{}
	for _, it := range list.Items {
		phases[it.Metadata.Name] = it.Status.Phase
	}
	return phases
}

// keys lists every key of loc under prefix.
func keys(t *testing.T, loc *store.Location, prefix string) []string {
	t.Helper()
	var out []string
	it := loc.Bucket().List(nil)
	for {
		o, err := it.Next(context.Background())
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("listing %s: %v", loc.URL(), err)
		}
		if strings.HasPrefix(o.Key, prefix) {
			out = append(out, o.Key)
		}
	}
	return out
}
