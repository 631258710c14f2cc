package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestEncryption backs up a Secret with --encryption-recipient: no byte
// of the store holds the Secret's value, a restore without the identity
// fails clearly, and one with it restores the value.
func TestEncryption(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	const marker = "ferry-known-secret-value-7f3a9c"
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	if _, err := src.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vault"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.CoreV1().Secrets("vault").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		StringData: map[string]string{"password": marker}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(t.TempDir(), "key.txt")
	if err := os.WriteFile(idFile, []byte("# test key\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var outputs []string
	keep := func(r result) result { outputs = append(outputs, r.stdout, r.stderr); return r }

	b := keep(e.run(t, "backup", "create", "sealed", "--context", "src", "--include-namespaces", "vault", "--encryption-recipient", id.Recipient().String(), "-o", "json"))
	if b.code != 0 {
		t.Fatalf("backup: exit %d: %s %s", b.code, b.stdout, b.stderr)
	}
	// Every file of the backup but its commit markers is age-encrypted:
	// it starts with the age header and is not a gzip stream (the archive
	// is gzipped before it is encrypted, so the absence of the value alone
	// proves nothing). The markers, plaintext, do not hold the value.
	dir := strings.TrimPrefix(e.storage, "file://")
	needles := [][]byte{[]byte(marker), []byte(base64.StdEncoding.EncodeToString([]byte(marker)))}
	sealed := checkSealed(t, filepath.Join(dir, "backups", "sealed"), needles, "ferry-backup.json", "ferry-backup-started.json")
	for _, want := range []string{"sealed.tar.gz", "sealed-results.json.gz"} {
		if !sealed[want] {
			t.Errorf("backup sealed has no encrypted %s; encrypted files: %v", want, sealed)
		}
	}

	// Without the identity: a clear failure, nothing written.
	r := keep(e.run(t, "restore", "create", "sealed-1", "--from-backup", "sealed", "--context", "dst"))
	if r.code != 1 || !strings.Contains(r.stderr, "--encryption-identity") || !strings.Contains(r.stderr, "encrypted") {
		t.Fatalf("restore without identity: exit %d stderr %q", r.code, r.stderr)
	}
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	if _, err := dst.CoreV1().Namespaces().Get(ctx, "vault", metav1.GetOptions{}); err == nil {
		t.Fatal("restore without identity wrote namespace vault")
	}
	// A wrong identity is refused too.
	other, _ := age.GenerateX25519Identity()
	otherFile := filepath.Join(t.TempDir(), "other.txt")
	_ = os.WriteFile(otherFile, []byte(other.String()+"\n"), 0o600)
	if r := keep(e.run(t, "backup", "verify", "sealed", "--encryption-identity", otherFile)); r.code != 1 || !strings.Contains(r.stderr, "decrypt") {
		t.Errorf("verify with a wrong identity: exit %d stderr %q", r.code, r.stderr)
	}
	if r := keep(e.run(t, "backup", "verify", "sealed", "--encryption-identity", idFile)); r.code != 0 {
		t.Errorf("verify with the identity: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	// With it: the Secret arrives intact.
	r = keep(e.run(t, "restore", "create", "sealed-2", "--from-backup", "sealed", "--context", "dst", "--encryption-identity", idFile))
	if r.code != 0 {
		t.Fatalf("restore with identity: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	s, err := dst.CoreV1().Secrets("vault").Get(ctx, "db", metav1.GetOptions{})
	if err != nil || string(s.Data["password"]) != marker {
		t.Fatalf("restored secret: %v %q", err, s.Data["password"])
	}
	// The restore's results name the backup's objects: encrypted too.
	if got := checkSealed(t, filepath.Join(dir, "restores", "sealed-2"), needles, "ferry-restore.json"); !got["sealed-2-results.json.gz"] {
		t.Errorf("restore sealed-2 has no encrypted results file; encrypted files: %v", got)
	}
	keep(e.run(t, "restore", "describe", "sealed-2", "--details", "--encryption-identity", idFile))
	keep(e.run(t, "backup", "describe", "sealed", "--details", "-o", "json", "--encryption-identity", idFile))
	for _, o := range outputs {
		for _, n := range needles {
			if bytes.Contains([]byte(o), n) {
				t.Errorf("ferry printed the secret value: %q", o)
			}
		}
	}
	// A bad recipient is refused before anything is written.
	if r := e.run(t, "backup", "create", "bad-key", "--context", "src", "--encryption-recipient", "age1notakey"); r.code != 1 || !strings.Contains(r.stderr, "age public key") {
		t.Errorf("bad recipient: exit %d stderr %q", r.code, r.stderr)
	}
	if r := e.run(t, "backup", "get", "bad-key"); r.code != 1 {
		t.Errorf("a backup with a bad recipient left something behind: %s", r.stdout)
	}
}

// checkSealed asserts that every file under dir except those named plain
// is age-encrypted: it starts with the age header and does not gunzip.
// No file, plain or not, may hold any of needles. It returns the names
// of the encrypted files.
func checkSealed(t *testing.T, dir string, needles [][]byte, plain ...string) map[string]bool {
	t.Helper()
	sealed := map[string]bool{}
	files := 0
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		files++
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(data, n) {
				t.Errorf("%s holds the secret in plaintext (%q)", p, n)
			}
		}
		if slices.Contains(plain, info.Name()) {
			return nil
		}
		if !bytes.HasPrefix(data, []byte("age-encryption.org/v1\n")) {
			t.Errorf("%s is not age-encrypted: it starts with %q", p, data[:min(len(data), 24)])
			return nil
		}
		if zr, err := gzip.NewReader(bytes.NewReader(data)); err == nil {
			_, err = io.Copy(io.Discard, zr)
			t.Errorf("%s gunzips (read error: %v): it is not encrypted", p, err)
			return nil
		}
		sealed[info.Name()] = true
		return nil
	})
	if err != nil || files <= len(plain) {
		t.Fatalf("walked %d files under %s: %v", files, dir, err)
	}
	return sealed
}
