package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
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
	// No plaintext in the store, in any encoding the archive could use.
	dir := strings.TrimPrefix(e.storage, "file://")
	needles := [][]byte{[]byte(marker), []byte(base64.StdEncoding.EncodeToString([]byte(marker)))}
	files := 0
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
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
		return nil
	})
	if err != nil || files < 3 {
		t.Fatalf("walked %d store files: %v", files, err)
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
