package e2e

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/servermode"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestServerCredentials: a location's credential Secret, written by
// `ferry install --credentials-file`, is what server mode uses for every
// scheme, in the server, the node agent and the server's helper pods. One
// cluster with a real node is installed in turn with an S3 (versitygw),
// an Azure (Azurite) and a GCS (fake-gcs-server) location; the server's
// own environment has no credentials at all. For each, a Backup with the
// data of a running pod's emptyDir (node agent) and of a claim no running
// pod mounts (helper pod) completes, and its archive is in that store.
// Azurite checks the shared key: a wrong key in the Secret makes the
// location Unavailable with an access-denied reason. fake-gcs-server
// checks nothing, so the service-account key's token_uri is a token
// endpoint of this test that checks the key's signature: a wrong key is
// refused there (the location Unavailable), the right one gets tokens.
// Each install replaces the Secret's keys with the new scheme's. Then the
// CLI without the server backs up the same volumes through helper pods
// into the azblob and gs locations, with credentials from its environment.
func TestServerCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster with a node")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	reg, err := testenv.StartRegistry(ctx, t, testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	image := makeImage(t, reg)
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	az, err := testenv.StartAzurite(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	gcs, err := testenv.StartGCS(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.CreateBucket(ctx, "ferry"); err != nil {
		t.Fatal(err)
	}
	if err := az.CreateContainer(ctx, "ferry"); err != nil {
		t.Fatal(err)
	}
	if err := gcs.CreateBucket(ctx, "ferry"); err != nil {
		t.Fatal(err)
	}
	cs, err := testenv.StartNodeClusters(ctx, t, reg, "creds")
	if err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	tokens := startTokenServer(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, c); err != nil {
		t.Fatal(err)
	}
	password := filepath.Join(dir, "password")
	writeFile(t, password, "credentials-test-password\n")
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	s3Creds := file("s3.env", fmt.Sprintf("AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n", s3.AccessKey, s3.SecretKey))
	wrongKey := base64.StdEncoding.EncodeToString([]byte("not the account's key, but base64 all the same"))
	azWrong := file("azure-wrong.env", fmt.Sprintf("%s=%s\n%s=%s\n", store.EnvAzureStorageAccount, testenv.AzuriteAccount, store.EnvAzureStorageKey, wrongKey))
	azCreds := file("azure.env", fmt.Sprintf("# the development account\n%s=%s\n%s=%s\n", store.EnvAzureStorageAccount, testenv.AzuriteAccount, store.EnvAzureStorageKey, testenv.AzuriteKey))
	gsCreds := file("sa.json", tokens.serviceAccount(t, tokens.key))
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gsWrong := file("sa-wrong.json", tokens.serviceAccount(t, otherKey))

	k := kubernetes.NewForConfigOrDie(c.Config)
	cl, err := crclient.New(c.Config, crclient.Options{Scheme: servermode.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	credsWorkload(ctx, t, c, reg)
	// installed is when the last install began: location waits for a
	// validation after it, not the previous location's status.
	var installed time.Time
	install := func(locURL, creds string) {
		t.Helper()
		installed = time.Now().Truncate(time.Second)
		r := ferry(t, nil, "install", "--apply", "--kubeconfig", kubeconfig, "--image", image, "--host-pods-dir", filepath.Join(c.Node.RootDir, "pods"),
			"--location-url", locURL, "--credentials-file", creds, "--repository-password-file", password)
		if r.code != 0 {
			t.Fatalf("install %s: exit %d\n%s\n%s", store.Redact(locURL), r.code, r.stdout, r.stderr)
		}
	}
	location := func(want v1alpha1.LocationPhase, msg string) {
		t.Helper()
		poll(t, 90*time.Second, "location "+string(want), func() error {
			bsl := &v1alpha1.BackupStorageLocation{}
			if err := cl.Get(ctx, crclient.ObjectKey{Namespace: "ferry", Name: "default"}, bsl); err != nil {
				return err
			}
			if v := bsl.Status.LastValidationTime; v == nil || v.Time.Before(installed) {
				return fmt.Errorf("not validated since the install (URL %s)", bsl.Spec.URL)
			}
			if bsl.Status.Phase != want || !strings.Contains(bsl.Status.Message, msg) {
				return fmt.Errorf("phase %q: %s (URL %s)", bsl.Status.Phase, bsl.Status.Message, bsl.Spec.URL)
			}
			return nil
		})
	}
	backup := func(name string, loc *store.Location) {
		t.Helper()
		defer loc.Close()
		b := v1alpha1.NewBackup(name)
		b.Namespace = "ferry"
		b.Spec.IncludedNamespaces = []string{"app"}
		b.Spec.DefaultVolumesToFsBackup = true
		if err := cl.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		poll(t, 3*time.Minute, "backup "+name, func() error {
			if err := cl.Get(ctx, crclient.ObjectKeyFromObject(b), b); err != nil {
				return err
			}
			switch b.Status.Phase {
			case v1alpha1.PhaseCompleted:
				return nil
			case v1alpha1.PhaseFailed, v1alpha1.PhasePartiallyFailed:
				dumpCluster(ctx, t, c)
				t.Fatalf("backup %s: %s: %s (pod volumes %+v)", name, b.Status.Phase, b.Status.FailureReason, b.Status.PodVolumes)
			}
			return fmt.Errorf("phase %q", b.Status.Phase)
		})
		if pv := b.Status.PodVolumes; pv == nil || pv.Completed != 2 {
			t.Errorf("backup %s: pod volumes %+v, want 2 completed (the emptyDir by the node agent, the claim by a helper pod)", name, pv)
		}
		if ok, err := loc.Bucket().Exists(ctx, store.ArchiveKey(name)); err != nil || !ok {
			t.Errorf("backup %s: archive %s in %s: %v, %v", name, store.ArchiveKey(name), loc.URL(), ok, err)
		}
		t.Logf("backup %s completed after %s", name, time.Since(start).Round(time.Second))
	}
	open := func(u string, creds map[string]string) *store.Location {
		t.Helper()
		loc, err := store.Open(ctx, u, store.WithCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}

	install(fmt.Sprintf("s3://ferry?endpoint=%s&use_path_style=true&region=%s", s3.NodeEndpoint, testenv.S3Region), s3Creds)
	waitLabeledRunning(ctx, t, k, "ferry", "app.kubernetes.io/component=ferry-server")
	waitLabeledRunning(ctx, t, k, "ferry", "app.kubernetes.io/component=ferry-node-agent")
	t.Logf("installed after %s", time.Since(start).Round(time.Second))
	location(v1alpha1.LocationAvailable, "")
	backup("via-s3", open(s3.URL("ferry"), map[string]string{store.EnvAWSAccessKeyID: s3.AccessKey, store.EnvAWSSecretAccessKey: s3.SecretKey, store.EnvAWSRegion: testenv.S3Region}))

	// Each step changes the URL, so that the server validates the
	// location at once (not at its next period).
	install(az.NodeURL("ferry"), azWrong)
	location(v1alpha1.LocationUnavailable, "access denied")
	install(gcs.NodeURL("ferry"), gsWrong)
	// The Azure location's refusal is Unavailable too: wait for this one's.
	location(v1alpha1.LocationUnavailable, "gs://ferry")
	if n, m := tokens.refused.Load(), tokens.accepted.Load(); n == 0 || m != 0 {
		t.Errorf("token endpoint: %d requests refused, %d accepted; want the wrong key's refused", n, m)
	}

	install(az.NodeURL("ferry"), azCreds)
	location(v1alpha1.LocationAvailable, "")
	backup("via-azblob", open(az.URL("ferry"), az.Credentials()))

	install(gcs.NodeURL("ferry"), gsCreds)
	location(v1alpha1.LocationAvailable, "")
	before := tokens.accepted.Load()
	if before == 0 {
		t.Errorf("location Available with no token given for its service-account key")
	}
	backup("via-gs", open(gcs.URL("ferry"), nil))
	if n := tokens.accepted.Load(); n <= before {
		t.Errorf("token endpoint: %d tokens given before the backup, %d after; want the node agent's and the helper pod's too", before, n)
	}
	sec, err := k.CoreV1().Secrets("ferry").Get(ctx, "ferry-credentials", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.Data) != 1 || len(sec.Data[store.EnvGoogleCredentialsJSON]) == 0 {
		var keys []string
		for key := range sec.Data {
			keys = append(keys, key)
		}
		t.Errorf("Secret ferry-credentials after the gs install has keys %v, want only %s", keys, store.EnvGoogleCredentialsJSON)
	}

	// Without the server: the CLI's helper pods get the credentials of
	// the location's scheme from the CLI's environment (for gs the key
	// file GOOGLE_APPLICATION_CREDENTIALS names).
	cli := func(name, locURL string, env []string, loc *store.Location) {
		t.Helper()
		defer loc.Close()
		r := ferry(t, env, "backup", "create", name, "--kubeconfig", kubeconfig, "--storage", locURL, "--helper-image", image,
			"--node-pods-dir", filepath.Join(c.Node.RootDir, "pods"), "--repository-password-file", password,
			"--include-namespaces", "app", "--default-volumes-to-fs-backup", "-o", "json")
		if r.code != 0 || !strings.Contains(r.stdout, `"phase": "Completed"`) {
			dumpCluster(ctx, t, c)
			t.Fatalf("CLI backup %s: exit %d\n%s\n%s", name, r.code, r.stdout, r.stderr)
		}
		var out struct {
			Status v1alpha1.BackupStatus `json:"status"`
		}
		mustJSON(t, r.stdout, &out)
		if pv := out.Status.PodVolumes; pv == nil || pv.Completed != 2 {
			t.Errorf("CLI backup %s: pod volumes %+v, want 2 completed by helper pods", name, pv)
		}
		if ok, err := loc.Bucket().Exists(ctx, store.ArchiveKey(name)); err != nil || !ok {
			t.Errorf("CLI backup %s: archive in %s: %v, %v", name, loc.URL(), ok, err)
		}
		t.Logf("CLI backup %s completed after %s", name, time.Since(start).Round(time.Second))
	}
	cli("cli-azblob", az.NodeURL("ferry"), az.Env(), open(az.URL("ferry"), az.Credentials()))
	before = tokens.accepted.Load()
	cli("cli-gs", gcs.NodeURL("ferry"), []string{"GOOGLE_APPLICATION_CREDENTIALS=" + gsCreds}, open(gcs.URL("ferry"), nil))
	if n := tokens.accepted.Load(); n <= before {
		t.Errorf("token endpoint: %d tokens given before the CLI's gs backup, %d after; want the helper pods'", before, n)
	}
	noHelperLeft(ctx, t, c)
	t.Logf("took %s", time.Since(start).Round(time.Second))
}

// credsWorkload makes namespace app in c: pod web, running, with the
// opted-in emptyDir cache (its data read by the node agent), and claim
// data written by pod writer, which has ended (so a helper pod reads it).
func credsWorkload(ctx context.Context, t *testing.T, c *testenv.Cluster, reg *testenv.Registry) {
	t.Helper()
	k := kubernetes.NewForConfigOrDie(c.Config)
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.CoreV1().PersistentVolumeClaims("app").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: claimSpec()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := workloadFixture{ns: "app", image: reg.NodeHost + "/" + testenv.BusyboxImage}
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{v1alpha1.AnnotationBackupVolumes: "data"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{f.container(true)},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	writer := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{f.container(false)}, Volumes: []corev1.Volume{claimVolume("data")}}}
	for _, p := range []*corev1.Pod{web, writer} {
		if _, err := k.CoreV1().Pods("app").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitAppReady(ctx, t, c, "app", "web")
	poll(t, 3*time.Minute, "pod writer Succeeded", func() error {
		p, err := k.CoreV1().Pods("app").Get(ctx, "writer", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
}

// tokenServer is an OAuth 2.0 token endpoint for service-account keys (the
// JWT-bearer grant Google's libraries use with a key's token_uri), which
// pods reach at HostIP: it gives a token for an assertion signed with key,
// and refuses any other, counting both.
type tokenServer struct {
	key               *rsa.PrivateKey
	url               string
	accepted, refused atomic.Int64
}

func startTokenServer(t *testing.T) *tokenServer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &tokenServer{key: key, url: fmt.Sprintf("http://%s:%d/token", testenv.HostIP, ln.Addr().(*net.TCPAddr).Port)}
	srv := &http.Server{Handler: http.HandlerFunc(ts.token), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ts
}

func (ts *tokenServer) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if err := ts.verify(r); err != nil {
		ts.refused.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": err.Error()})
		return
	}
	ts.accepted.Add(1)
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "ferry-test-token", "token_type": "Bearer", "expires_in": 3600})
}

// verify checks that r's assertion is a JWT signed (RS256) with ts.key.
func (ts *tokenServer) verify(r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return err
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		return fmt.Errorf("no JWT assertion (grant_type %q)", r.PostForm.Get("grant_type"))
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&ts.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("invalid JWT signature")
	}
	return nil
}

// serviceAccount is a service-account key JSON with private key key and
// ts's token_uri.
func (ts *tokenServer) serviceAccount(t *testing.T, key *rsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(map[string]string{
		"type": "service_account", "project_id": "ferry-test", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "ferry@ferry-test.iam.gserviceaccount.com", "client_id": "1",
		"auth_uri": ts.url, "token_uri": ts.url,
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}
