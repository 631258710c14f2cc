package backends

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cases run in this order on each backend; later ones may use what
// earlier ones made (restore and verify take backup's b1).
var cases = []struct {
	name string
	run  func(t *testing.T, s *suite, b *backend)
}{
	{"backup", caseBackup},
	{"restore", caseRestore},
	{"verify", caseVerify},
	{"delete", caseDelete},
	{"prefix", casePrefix},
	{"encryption", caseEncryption},
	{"images", caseImages},
	{"volumes", caseVolumes},
	{"incomplete", caseIncomplete},
	{"pagination", casePagination},
	{"credentials", caseCredentials},
}

func mustRun(t *testing.T, r result, what string) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\nstdout: %.3000s\nstderr: %.3000s", what, r.code, r.stdout, r.stderr)
	}
	return r
}

// caseBackup backs up namespace shop: Completed, committed in the store.
func caseBackup(t *testing.T, s *suite, b *backend) {
	r := mustRun(t, s.ferry(t, b, "", "backup", "create", "b1", "--context", "src", "--include-namespaces", "shop", "-o", "json"), "backup create")
	bk := &v1alpha1.Backup{}
	if err := json.Unmarshal([]byte(r.stdout), bk); err != nil {
		t.Fatal(err)
	}
	if bk.Status.Phase != v1alpha1.PhaseCompleted {
		t.Fatalf("phase %s, want Completed", bk.Status.Phase)
	}
	if ks := keys(t, b.open(t, ""), store.BackupDir("b1")+store.BackupMarker); len(ks) != 1 {
		t.Fatalf("commit marker of b1 in the store: %v", ks)
	}
}

// caseRestore restores b1 into the second cluster and finds its objects.
func caseRestore(t *testing.T, s *suite, b *backend) {
	ns := b.name + "-restore"
	mustRun(t, s.ferry(t, b, "", "restore", "create", "r1", "--from-backup", "b1", "--context", "dst", "--namespace-mappings", "shop:"+ns), "restore create")
	s.wantConfigMaps(t, ns)
}

func (s *suite) wantConfigMaps(t *testing.T, ns string) {
	t.Helper()
	for _, n := range []string{"cm-0", "cm-1", "cm-2"} {
		cm, err := s.dst.CoreV1().ConfigMaps(ns).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil || cm.Data["k"] != n {
			t.Errorf("ConfigMap %s/%s in the target: %v, %v", ns, n, cm.Data, err)
		}
	}
}

// caseVerify checks b1 entry by entry against its commit.
func caseVerify(t *testing.T, s *suite, b *backend) {
	mustRun(t, s.ferry(t, b, "", "backup", "verify", "b1"), "backup verify")
}

// caseDelete deletes b1: nothing of it is left in the store.
func caseDelete(t *testing.T, s *suite, b *backend) {
	mustRun(t, s.ferry(t, b, "", "backup", "delete", "b1"), "backup delete")
	if ks := keys(t, b.open(t, ""), store.BackupDir("b1")); len(ks) != 0 {
		t.Errorf("after delete, the store still holds %v", ks)
	}
	if r := s.ferry(t, b, "", "backup", "get", "b1"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("backup get b1 after delete: exit %d %s", r.code, r.stderr)
	}
}

// casePrefix backs up into ?prefix=team-a/: every key it wrote is under
// the prefix, and the unprefixed location does not list it.
func casePrefix(t *testing.T, s *suite, b *backend) {
	mustRun(t, s.ferry(t, b, "team-a/", "backup", "create", "p1", "--context", "src", "--include-namespaces", "shop"), "backup create under a prefix")
	all := keys(t, b.open(t, ""), "")
	var under int
	for _, k := range all {
		if strings.Contains(k, "/p1/") && !strings.HasPrefix(k, "team-a/backups/p1/") {
			t.Errorf("key %s of the prefixed backup is outside team-a/", k)
		}
		if strings.HasPrefix(k, "team-a/backups/p1/") {
			under++
		}
	}
	if under < 3 {
		t.Errorf("%d keys under team-a/backups/p1/, want the started and commit markers and the archive: %v", under, all)
	}
	if _, ok := s.backupGet(t, b, "")["p1"]; ok {
		t.Error("the unprefixed location lists p1")
	}
	if got := s.backupGet(t, b, "team-a/")["p1"]; got != "Completed" {
		t.Errorf("the prefixed location lists p1 as %q", got)
	}
}

// caseEncryption backs up with an age recipient: no stored byte holds the
// Secret's value (plain or base64), and a restore with the identity
// brings it back.
func caseEncryption(t *testing.T, s *suite, b *backend) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(t.TempDir(), "id.txt")
	if err := os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, s.ferry(t, b, "", "backup", "create", "e1", "--context", "src", "--include-namespaces", "shop", "--encryption-recipient", id.Recipient().String()), "encrypted backup")
	loc := b.open(t, "")
	ks := keys(t, loc, store.BackupDir("e1"))
	if len(ks) < 3 {
		t.Fatalf("encrypted backup wrote %v", ks)
	}
	for _, k := range ks {
		data, err := loc.Bucket().ReadAll(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{needle, base64.StdEncoding.EncodeToString([]byte(needle))} {
			if bytes.Contains(data, []byte(n)) {
				t.Errorf("%s holds the Secret's value in the clear (%q)", k, n)
			}
		}
	}
	ns := b.name + "-enc"
	mustRun(t, s.ferry(t, b, "", "restore", "create", "e1-r", "--from-backup", "e1", "--context", "dst", "--namespace-mappings", "shop:"+ns, "--encryption-identity", idFile), "restore with the identity")
	sec, err := s.dst.CoreV1().Secrets(ns).Get(context.Background(), "sealed", metav1.GetOptions{})
	if err != nil || string(sec.Data["password"]) != needle {
		t.Errorf("restored Secret: %v, %v", sec, err)
	}
}

// caseImages bundles the Deployment's image into the location, verifies
// every bundled blob from the store, and pushes it from the store into
// the target registry on restore.
func caseImages(t *testing.T, s *suite, b *backend) {
	r := mustRun(t, s.ferry(t, b, "", "backup", "create", "i1", "--context", "src", "--include-namespaces", "shop", "--images", "bundle", "--image-retries", "1", "-o", "json"), "bundle backup")
	bk := &v1alpha1.Backup{}
	if err := json.Unmarshal([]byte(r.stdout), bk); err != nil {
		t.Fatal(err)
	}
	if bk.Status.Images == nil || bk.Status.Images.BlobsWritten == 0 {
		t.Fatalf("bundle backup wrote no blobs: %+v", bk.Status.Images)
	}
	if blobs := keys(t, b.open(t, ""), "images/blobs/sha256/"); int64(len(blobs)) < bk.Status.Images.BlobsWritten {
		t.Errorf("%d blobs in the store, the backup wrote %d", len(blobs), bk.Status.Images.BlobsWritten)
	}
	if v := mustRun(t, s.ferry(t, b, "", "backup", "verify", "i1"), "verify bundle"); !strings.Contains(v.stdout, "bundled blobs") {
		t.Errorf("backup verify did not read the bundle:\n%s", v.stdout)
	}
	mustRun(t, s.ferry(t, b, "", "restore", "create", "i1-r", "--from-backup", "i1", "--context", "dst", "--namespace-mappings", "shop:"+b.name+"-img",
		"--push-images", "--image-registry-mappings", s.srcReg.Host+"/shop="+s.dstReg.Host+"/"+b.name), "restore --push-images")
	want, _ := s.srcReg.Digest("shop/app:1")
	if got, ok := s.dstReg.Digest(b.name + "/app:1"); !ok || got != want {
		t.Errorf("pushed image %s/app:1: %v (present %v), want %v", b.name, got, ok, want)
	}
}

// caseVolumes snapshots a small folder into the location's kopia
// repository (in-process, under prefix vol/) and restores it.
func caseVolumes(t *testing.T, s *suite, b *backend) {
	ctx := context.Background()
	loc := b.open(t, "vol/")
	repo, err := volumes.Open(ctx, loc, "correct horse battery staple", volumes.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close(ctx)
	src, dst := t.TempDir(), t.TempDir()
	files := map[string]string{"a.txt": "alpha", "sub/b.bin": strings.Repeat("b", 1<<20)}
	for name, content := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := repo.Snapshot(ctx, src, "pvc/shop/data", map[string]string{volumes.TagBackup: "v1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Restore(ctx, res.SnapshotID, dst, "v1-r", nil); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if got, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(got) != content {
			t.Errorf("restored %s: %d bytes, %v; want %d", name, len(got), err, len(content))
		}
	}
	if ks := keys(t, b.open(t, ""), "vol/volumes/"); len(ks) == 0 {
		t.Error("no repository objects under vol/volumes/")
	}
}

// caseIncomplete leaves what a backup killed after its first write
// leaves (the started marker and part of the archive, no commit marker;
// test/e2e's TestBackupKilled kills real runs on file://): it is listed
// Incomplete, a restore of it is refused, and delete removes it.
func caseIncomplete(t *testing.T, s *suite, b *backend) {
	ctx := context.Background()
	loc := b.open(t, "")
	started := v1alpha1.NewBackup("crashed")
	started.Status.Phase = v1alpha1.PhaseInProgress
	if err := loc.PutJSON(ctx, store.BackupDir("crashed")+store.BackupStartedMarker, started); err != nil {
		t.Fatal(err)
	}
	if err := loc.Bucket().WriteAll(ctx, store.ArchiveKey("crashed"), []byte("\x1f\x8b partial"), nil); err != nil {
		t.Fatal(err)
	}
	if got := s.backupGet(t, b, "")["crashed"]; got != "Incomplete" {
		t.Errorf("backup get lists crashed as %q, want Incomplete", got)
	}
	r := s.ferry(t, b, "", "restore", "create", "crashed-r", "--from-backup", "crashed", "--context", "dst", "--namespace-mappings", "shop:"+b.name+"-crashed")
	if r.code != 1 || !strings.Contains(r.stderr, "incomplete") {
		t.Errorf("restore of an incomplete backup: exit %d, want 1 naming it incomplete\n%s", r.code, r.stderr)
	}
	mustRun(t, s.ferry(t, b, "", "backup", "delete", "crashed"), "delete the incomplete backup")
	if ks := keys(t, loc, store.BackupDir("crashed")); len(ks) != 0 {
		t.Errorf("after delete: %v", ks)
	}
}

// casePagination writes 1,001 committed backup records (more than one
// list page of S3, GCS and Azure) under prefix many/ and lists them all.
func casePagination(t *testing.T, s *suite, b *backend) {
	const n = 1001
	ctx := context.Background()
	loc := b.open(t, "many/")
	names := make(chan string)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				bk := v1alpha1.NewBackup(name)
				bk.Status.Phase = v1alpha1.PhaseCompleted
				errs <- loc.PutJSON(ctx, store.BackupDir(name)+store.BackupMarker, bk)
			}
		}()
	}
	for i := 0; i < n; i++ {
		names <- fmt.Sprintf("page-%04d", i)
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := s.backupGet(t, b, "many/")
	if len(got) != n {
		t.Fatalf("backup get listed %d backups, want %d", len(got), n)
	}
	for _, name := range []string{"page-0000", "page-0999", "page-1000"} {
		if got[name] != "Completed" {
			t.Errorf("%s listed as %q", name, got[name])
		}
	}
}

// caseCredentials: refused credentials are reported as access denied,
// naming the scheme's credential keys, not as a missing bucket.
func caseCredentials(t *testing.T, s *suite, b *backend) {
	if b.wrongEnv == nil {
		t.Skip("file:// locations take no credentials")
	}
	r := ferry(t, b.wrongEnv, "backup", "get", "--kubeconfig", s.kubeconfig, "--storage", b.base)
	if r.code != 1 || !strings.Contains(r.stderr, "access denied") || !strings.Contains(r.stderr, b.wrongKey) || strings.Contains(r.stderr, "not found") {
		t.Errorf("backup get with wrong credentials: exit %d, want 1, access denied naming %s, not \"not found\"\n%s", r.code, b.wrongKey, r.stderr)
	}
}

// refusedServiceAccount returns a service-account key JSON whose token
// exchange is refused. fake-gcs-server does not authenticate at all, so
// the closest real refusal of Google credentials is the OAuth token
// exchange: token_uri points at a loopback endpoint that answers as
// Google's does for a deleted or unknown key (400 invalid_grant).
func refusedServiceAccount(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
	}))
	t.Cleanup(srv.Close)
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "ferry-test", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "ferry@ferry-test.iam.gserviceaccount.com", "client_id": "1", "token_uri": srv.URL + "/token",
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}
