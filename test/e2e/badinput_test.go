package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// TestBadInput feeds ferry damaged, missing and unreachable inputs. Each
// must fail with exit code 1 and a message naming the problem, and write
// nothing into the target cluster.
func TestBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	createApp(t, src, "app")
	e.backup(t, "good", "--include-namespaces", "app")
	storeDir := strings.TrimPrefix(e.storage, "file://")
	before := targetNamespaces(t, dst)

	// failsCleanly asserts exit code 1, a message holding every one of
	// want (each an alternative list), and an untouched target.
	failsCleanly := func(t *testing.T, r result, what string, want ...[]string) {
		t.Helper()
		msg := r.stdout + r.stderr
		ok := true
		if r.code != 1 {
			ok = false
			t.Errorf("%s: exit %d, want 1\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
		}
		for _, alts := range want {
			if !containsAny(msg, alts) {
				ok = false
				t.Errorf("%s: message does not mention any of %q:\nstdout: %s\nstderr: %s", what, alts, r.stdout, r.stderr)
			}
		}
		if ok {
			t.Logf("%s: exit %d: %s", what, r.code, strings.TrimSpace(msg))
		}
		checkTargetUntouched(t, dst, before)
	}

	t.Run("truncated archive", func(t *testing.T) {
		dir := copyBackup(t, storeDir, "good", "trunc")
		archive := filepath.Join(dir, "trunc.tar.gz")
		fi, err := os.Stat(archive)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(archive, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		_, r := e.restore(t, "r-trunc", "trunc")
		failsCleanly(t, r, "restore of a truncated archive", []string{"truncated", "backups/trunc/trunc.tar.gz"})
	})

	t.Run("flipped byte", func(t *testing.T) {
		dir := copyBackup(t, storeDir, "good", "flip")
		archive := filepath.Join(dir, "flip.tar.gz")
		data, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0xff
		if err := os.WriteFile(archive, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, r := e.restore(t, "r-flip", "flip")
		failsCleanly(t, r, "restore of an archive with one flipped byte",
			[]string{"flip.tar.gz", "archive"}, []string{"SHA-256", "sha256", "corrupt"})
	})

	t.Run("manifest mismatch", func(t *testing.T) {
		const entry = "resources/configmaps/namespaces/app/cm-1.json"
		dir := copyBackup(t, storeDir, "good", "mism")
		archive := filepath.Join(dir, "mism.tar.gz")
		data, err := rewriteEntry(archive, entry, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"value-1"`), []byte(`"VALUE-1"`), 1)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(archive, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// The commit marker matches the new tar.gz, so only the manifest
		// (unchanged, with cm-1's old digest) can catch the change.
		sum := sha256.Sum256(data)
		editMarker(t, filepath.Join(dir, "ferry-backup.json"), func(m map[string]any) {
			a := m["status"].(map[string]any)["archive"].(map[string]any)
			a["size"] = len(data)
			a["sha256"] = hex.EncodeToString(sum[:])
		})
		_, r := e.restore(t, "r-mism", "mism")
		failsCleanly(t, r, "restore of an archive whose entry does not match its manifest", []string{entry})
	})

	t.Run("backup not found", func(t *testing.T) {
		_, r := e.restore(t, "r-nosuch", "nosuch")
		failsCleanly(t, r, "restore of a backup that does not exist", []string{"not found"}, []string{"nosuch"})
	})

	t.Run("unreachable API server", func(t *testing.T) {
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		const cfg = `apiVersion: v1
kind: Config
clusters:
- name: dead
  cluster:
    server: https://127.0.0.1:1
    insecure-skip-tls-verify: true
users:
- name: dead
  user:
    token: not-a-token
contexts:
- name: dead
  context:
    cluster: dead
    user: dead
current-context: dead
`
		if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r := ferry(t, nil, "backup", "create", "x", "--kubeconfig", kc, "--storage", e.storage)
		took := time.Since(start)
		if took > 30*time.Second {
			t.Errorf("backup against an unreachable API server took %s, want under 30s", took.Round(time.Millisecond))
		}
		t.Logf("unreachable API server reported after %s: %s", took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
		failsCleanly(t, r, "backup from an unreachable API server", []string{"127.0.0.1:1"})
		if g := e.run(t, "backup", "get", "x"); g.code != 1 || !contains(g.stdout+g.stderr, "not found") {
			t.Errorf("after the failed backup, backup get x: exit %d, want 1 and not found (nothing left in the store)\nstdout: %s\nstderr: %s", g.code, g.stdout, g.stderr)
		}
	})

	t.Run("S3 credentials", func(t *testing.T) {
		ctx := context.Background()
		s3, err := testenv.StartS3(ctx, t)
		if err != nil {
			t.Fatal(err)
		}
		if err := s3.CreateBucket(ctx, "ferry"); err != nil {
			t.Fatal(err)
		}
		url := s3.URL("ferry")
		denied := []string{"access denied", "Access Denied", "AccessDenied", "credentials", "InvalidAccessKeyId"}
		for _, c := range []struct{ what, key, secret string }{
			{"unknown access key", "wrong-key", "wrong-secret"},
			{"wrong secret key", s3.AccessKey, "wrong-secret"},
		} {
			env := []string{"AWS_ACCESS_KEY_ID=" + c.key, "AWS_SECRET_ACCESS_KEY=" + c.secret, "AWS_REGION=" + testenv.S3Region}
			r := ferry(t, env, "backup", "get", "--storage", url)
			failsCleanly(t, r, "backup get with S3 credentials: "+c.what, denied)
			r = ferry(t, env, "restore", "create", "--from-backup", "x", "--kubeconfig", e.kubeconfig, "--context", "dst", "--storage", url)
			failsCleanly(t, r, "restore create with S3 credentials: "+c.what, denied)
			if contains(r.stdout+r.stderr, "wrong-secret") {
				t.Errorf("the error message shows the secret key:\n%s%s", r.stdout, r.stderr)
			}
		}

		// The right credentials work both ways.
		r := ferry(t, s3.Env(), "backup", "create", "s3b", "--include-namespaces", "app", "--kubeconfig", e.kubeconfig, "--context", "src", "--storage", url)
		if r.code != 0 {
			t.Fatalf("backup to S3 with the right credentials: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		r = ferry(t, s3.Env(), "restore", "create", "s3r", "--from-backup", "s3b", "--namespace-mappings", "app:app-s3", "--kubeconfig", e.kubeconfig, "--context", "dst", "--storage", url)
		if r.code != 0 {
			t.Fatalf("restore from S3 with the right credentials: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		checkApp(t, dst, "app-s3")
	})

	// Control: an undamaged copy made the same way restores, so the
	// failures above come from the damage, not from the copying.
	t.Run("undamaged copy", func(t *testing.T) {
		copyBackup(t, storeDir, "good", "copy-ok")
		rs, r := e.restore(t, "r-copy-ok", "copy-ok", "--namespace-mappings", "app:app-copy")
		if r.code != 0 || rs.Status.Counts.Failed != 0 {
			t.Fatalf("restore of an undamaged copy: exit %d, counts %+v\nstderr: %s", r.code, rs.Status.Counts, r.stderr)
		}
		checkApp(t, dst, "app-copy")
	})
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// createApp creates namespace ns with ConfigMaps cm-1..cm-3 (data
// key: value-N) and a Deployment web.
func createApp(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	createNamespace(t, cs, ns)
	for _, n := range []string{"1", "2", "3"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + n}, Data: map[string]string{"key": "value-" + n}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"app": "web"}
	replicas := int32(2)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkApp asserts that createApp's objects are in namespace ns.
func checkApp(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range []string{"1", "2", "3"} {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "cm-"+n, metav1.GetOptions{})
		if err != nil {
			t.Errorf("target configmap %s/cm-%s: %v", ns, n, err)
			continue
		}
		if cm.Data["key"] != "value-"+n {
			t.Errorf("target configmap %s/cm-%s data %v, want key: value-%s", ns, n, cm.Data, n)
		}
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("target deployment %s/web: %v", ns, err)
	}
}

func targetNamespaces(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	l, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range l.Items {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out
}

// checkTargetUntouched asserts that the target has the namespaces it had
// before and no object that a restore labelled.
func checkTargetUntouched(t *testing.T, cs kubernetes.Interface, before []string) {
	t.Helper()
	ctx := context.Background()
	if now := targetNamespaces(t, cs); !reflect.DeepEqual(now, before) {
		t.Errorf("target namespaces changed: %v, were %v", now, before)
	}
	sel := metav1.ListOptions{LabelSelector: v1alpha1.LabelBackup}
	var found []string
	nss, err := cs.CoreV1().Namespaces().List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss.Items {
		found = append(found, "namespace "+n.Name)
	}
	cms, err := cs.CoreV1().ConfigMaps("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		found = append(found, "configmap "+c.Namespace+"/"+c.Name)
	}
	ds, err := cs.AppsV1().Deployments("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Items {
		found = append(found, "deployment "+d.Namespace+"/"+d.Name)
	}
	if len(found) > 0 {
		t.Errorf("the target holds objects labelled %s: %v", v1alpha1.LabelBackup, found)
	}
}

// copyBackup copies backup from to a new backup to in the file store at
// storeDir: its files renamed (<from>.tar.gz → <to>.tar.gz, ...) and the
// markers' metadata.name and status.archive.key fixed. It returns the new
// backup's folder.
func copyBackup(t *testing.T, storeDir, from, to string) string {
	t.Helper()
	srcDir := filepath.Join(storeDir, "backups", from)
	dstDir := filepath.Join(storeDir, "backups", to)
	if err := os.MkdirAll(dstDir, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(srcDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := f.Name()
		if strings.HasPrefix(name, from+".") || strings.HasPrefix(name, from+"-") {
			name = to + strings.TrimPrefix(name, from)
		}
		data, err := os.ReadFile(filepath.Join(srcDir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dstDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, marker := range []string{"ferry-backup.json", "ferry-backup-started.json"} {
		editMarker(t, filepath.Join(dstDir, marker), func(m map[string]any) {
			m["metadata"].(map[string]any)["name"] = to
			if st, ok := m["status"].(map[string]any); ok {
				if a, ok := st["archive"].(map[string]any); ok {
					a["key"] = "backups/" + to + "/" + to + ".tar.gz"
				}
			}
		})
	}
	return dstDir
}

// editMarker rewrites the JSON file at path through edit.
func editMarker(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	edit(m)
	if data, err = json.MarshalIndent(m, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rewriteEntry returns the tar.gz at path with entry's content passed
// through change and every other entry (the manifest too) as it was.
func rewriteEntry(path, entry string, change func([]byte) []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	var out bytes.Buffer
	gw := gzip.NewWriter(&out)
	tw := tar.NewWriter(gw)
	changed := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		if hdr.Name == entry {
			nd := change(data)
			if bytes.Equal(nd, data) {
				return nil, errors.New("rewriteEntry: " + entry + " unchanged")
			}
			data, changed = nd, true
			hdr.Size = int64(len(data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if !changed {
		return nil, errors.New("rewriteEntry: no entry " + entry)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
