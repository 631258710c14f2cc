package e2e

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/volumes"
	"github.com/kubeferry/ferry/pkg/volumes/volumetest"
)

const volumePassword = "e2e repository password"

// TestVolumeRoundTrip backs up a pod's claim and emptyDir volumes from the
// source cluster's (stand-in) kubelet pods directory and restores them into
// the new pod's volume directories of the target cluster, on a file:// store
// and on S3, and compares them byte for byte with modes and times.
func TestVolumeRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	for _, backend := range []string{"file", "s3"} {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t)
			var env []string
			var s3Dir string
			if backend == "s3" {
				ctx := context.Background()
				s3, err := testenv.StartS3(ctx, t)
				if err != nil {
					t.Fatal(err)
				}
				if err := s3.CreateBucket(ctx, "ferry"); err != nil {
					t.Fatal(err)
				}
				e.storage = s3.URL("ferry")
				s3Dir = s3.Dir
				env = s3.Env()
			}
			// The file backend takes the full tree and the extra cases;
			// S3 (the same engine on another blob store, which
			// test/backends covers case by case) a tenth of it.
			volumeRoundTrip(t, e, append(env, volumes.EnvPassword+"="+volumePassword), s3Dir, backend == "file")
		})
	}
}

func volumeRoundTrip(t *testing.T, e *env, env []string, s3Dir string, extra bool) {
	ctx := context.Background()
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	run := func(args ...string) result {
		return ferry(t, env, append(args, "--kubeconfig", e.kubeconfig, "--storage", e.storage)...)
	}
	createNamespace(t, src, "vol")
	pod := createVolumePod(t, src, "vol", "app", "pv-app")
	hostSrc, hostDst := t.TempDir(), t.TempDir()
	dataDir := filepath.Join(hostSrc, string(pod.UID), "volumes", "kubernetes.io~csi", "pv-app", "mount")
	cacheDir := filepath.Join(hostSrc, string(pod.UID), "volumes", "kubernetes.io~empty-dir", "cache")
	for _, d := range []string{dataDir, cacheDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tree := volumetest.TreeOptions{BigFile: 200 << 20, SmallFiles: 10000, Marker: "E2E-MARKER", Seed: 7}
	if !extra {
		tree.BigFile, tree.SmallFiles = 20<<20, 1000
	}
	if _, err := volumetest.MakeTree(dataDir, tree); err != nil {
		t.Fatal(err)
	}
	if _, err := volumetest.MakeTree(cacheDir, volumetest.TreeOptions{SmallFiles: 50, Seed: 8}); err != nil {
		t.Fatal(err)
	}

	r := run("backup", "create", "b1", "--context", "src", "--include-namespaces", "vol", "--host-pods-dir", hostSrc, "-o", "json")
	if r.code != 0 {
		t.Fatalf("backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b := &v1alpha1.Backup{}
	mustJSON(t, r.stdout, b)
	// The configMap volume is never copied (its content is the ConfigMap
	// object's), so it is no skipped data (issue 28).
	if b.Status.Phase != v1alpha1.PhaseCompleted || b.Status.PodVolumes == nil || b.Status.PodVolumes.Completed != 2 || b.Status.PodVolumes.Skipped != 0 {
		t.Fatalf("backup status %+v, volumes %+v", b.Status, b.Status.PodVolumes)
	}
	if strings.Contains(r.stdout+r.stderr, volumePassword) {
		t.Errorf("the password was printed")
	}
	t.Logf("backed up %d files, %d bytes, uploaded %d bytes", b.Status.PodVolumes.Files, b.Status.PodVolumes.Bytes, b.Status.PodVolumes.UploadedBytes)

	// The target's kubelet stand-in mounts the restored pod's volumes.
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	go testenv.FakeKubelet(kctx, dst, "vol", "", hostDst)

	r = run("restore", "create", "r1", "--from-backup", "b1", "--context", "dst", "--host-pods-dir", hostDst, "--volume-timeout", "2m", "-o", "json")
	if r.code != 0 {
		t.Fatalf("restore: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	rs := &v1alpha1.Restore{}
	mustJSON(t, r.stdout, rs)
	if rs.Status.Phase != v1alpha1.PhaseCompleted || rs.Status.PodVolumes == nil || rs.Status.PodVolumes.Completed != 2 || rs.UID == "" {
		t.Fatalf("restore status %+v volumes %+v", rs.Status, rs.Status.PodVolumes)
	}
	got, err := dst.CoreV1().Pods("vol").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID == pod.UID {
		t.Fatalf("the target pod has the source's UID")
	}
	if len(got.Spec.InitContainers) == 0 || got.Spec.InitContainers[0].Name != "ferry-restore-wait" ||
		!strings.Contains(strings.Join(got.Spec.InitContainers[0].Command, " "), "/restores/data/.ferry/"+string(rs.UID)) {
		t.Errorf("restored pod's init containers: %+v", got.Spec.InitContainers)
	}
	newData := filepath.Join(hostDst, string(got.UID), "volumes", "kubernetes.io~csi", "pv-app", "mount")
	newCache := filepath.Join(hostDst, string(got.UID), "volumes", "kubernetes.io~empty-dir", "cache")
	for from, to := range map[string]string{dataDir: newData, cacheDir: newCache} {
		diffs, err := volumetest.Compare(from, to, v1alpha1.DoneMarkerDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(diffs) > 0 {
			t.Errorf("%s restored differently:\n%s", to, strings.Join(diffs, "\n"))
		}
		if _, err := os.Stat(volumes.MarkerPath(to, string(rs.UID))); err != nil {
			t.Errorf("done-marker: %v", err)
		}
	}
	// Encryption: no byte of the store holds the data's marker.
	storeDir := strings.TrimPrefix(e.storage, "file://")
	if !strings.HasPrefix(e.storage, "file://") {
		storeDir = s3Dir
	}
	noPlaintext(t, storeDir, "E2E-MARKER", "deep file")
	if r := run("backup", "verify", "b1"); r.code != 0 || !strings.Contains(r.stdout, "verified") {
		t.Errorf("backup verify: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !extra {
		return
	}

	// Incremental: change about 1 % of the data, back up again.
	big := filepath.Join(dataDir, "big.bin")
	f, err := os.OpenFile(big, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	change := make([]byte, 2<<20)
	_, _ = rand.Read(change)
	if _, err := f.WriteAt(change, 50<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r = run("backup", "create", "b2", "--context", "src", "--include-namespaces", "vol", "--host-pods-dir", hostSrc, "-o", "json")
	if r.code != 0 {
		t.Fatalf("backup 2: exit %d\n%s", r.code, r.stderr)
	}
	b2 := &v1alpha1.Backup{}
	mustJSON(t, r.stdout, b2)
	pct := 100 * float64(b2.Status.PodVolumes.UploadedBytes) / float64(b.Status.PodVolumes.UploadedBytes)
	t.Logf("incremental: first backup uploaded %d bytes, second (2 MiB of %d MiB changed) %d bytes: %.2f %%", b.Status.PodVolumes.UploadedBytes, b.Status.PodVolumes.Bytes>>20, b2.Status.PodVolumes.UploadedBytes, pct)
	if pct > 5 {
		t.Errorf("the second backup uploaded %.1f %% of the first", pct)
	}

	// Without the password a backup with volume data is not deleted at all.
	nopw := ferry(t, env[:len(env)-1], "backup", "delete", "b1", "--kubeconfig", e.kubeconfig, "--storage", e.storage)
	if nopw.code != 1 || !strings.Contains(nopw.stderr, "holds pod volume data") || !strings.Contains(nopw.stderr, volumes.EnvPassword) {
		t.Errorf("delete without the password: exit %d %s", nopw.code, nopw.stderr)
	}
	if g := run("backup", "get", "b1"); g.code != 0 {
		t.Errorf("backup b1 is gone after a refused delete: %s", g.stderr)
	}
	// Deleting the first backup deletes its snapshots, not the second's data.
	if r := run("backup", "delete", "b1"); r.code != 0 || !strings.Contains(r.stdout, "2 volume snapshots") {
		t.Errorf("backup delete: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := run("backup", "verify", "b2"); r.code != 0 {
		t.Errorf("backup verify b2 after deleting b1: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// Bad input: a wrong password writes nothing; a missing volume dir is
	// a per-volume error and the backup is PartiallyFailed.
	wrong := append(append([]string(nil), env[:len(env)-1]...), volumes.EnvPassword+"=wrong")
	r = ferry(t, wrong, "backup", "create", "b3", "--context", "src", "--include-namespaces", "vol", "--host-pods-dir", hostSrc, "--kubeconfig", e.kubeconfig, "--storage", e.storage)
	if r.code != 1 || !strings.Contains(r.stderr, "wrong repository password") {
		t.Errorf("wrong password: exit %d %s", r.code, r.stderr)
	}
	if g := run("backup", "get", "b3"); g.code == 0 {
		t.Errorf("a backup with a wrong password was written: %s", g.stdout)
	}
	createVolumePod(t, src, "vol", "ghost", "pv-ghost")
	r = run("backup", "create", "b4", "--context", "src", "--include-namespaces", "vol", "--host-pods-dir", hostSrc, "-o", "json")
	b4 := &v1alpha1.Backup{}
	if r.code != 2 {
		t.Fatalf("missing volume dir: exit %d\n%s", r.code, r.stderr)
	}
	mustJSON(t, r.stdout, b4)
	if b4.Status.Phase != v1alpha1.PhasePartiallyFailed || b4.Status.PodVolumes.Failed != 2 || b4.Status.PodVolumes.Completed != 2 {
		t.Errorf("missing volume dir: %+v %+v", b4.Status, b4.Status.PodVolumes)
	}
	d := run("backup", "describe", "b4")
	if !strings.Contains(d.stdout, "vol/ghost/data") || !strings.Contains(d.stdout, "no volume directory") {
		t.Errorf("describe does not name the missing volume dir:\n%s", d.stdout)
	}

	// A damaged pack blob: verify names the file; a restore fails that
	// volume, naming the file, and leaves no data and no done-marker.
	var pack string
	var size int64
	_ = filepath.WalkDir(filepath.Join(storeDir, "volumes"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "p") {
			if st, _ := d.Info(); st.Size() > size {
				pack, size = p, st.Size()
			}
		}
		return nil
	})
	data, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	for i := 64; i < len(data); i += 1 << 16 {
		data[i] ^= 0x5a
	}
	if err := os.WriteFile(pack, data, 0o644); err != nil {
		t.Fatal(err)
	}
	v := run("backup", "verify", "b2")
	if v.code != 1 || !strings.Contains(v.stdout, "damaged volume data") || !strings.Contains(v.stdout, "big.bin: ") {
		t.Errorf("verify of a damaged pack: exit %d\n%s\n%s", v.code, v.stdout, v.stderr)
	}
	go testenv.FakeKubelet(kctx, dst, "vol3", "", hostDst)
	r = run("restore", "create", "r3", "--from-backup", "b2", "--context", "dst", "--namespace-mappings", "vol:vol3", "--host-pods-dir", hostDst, "--volume-timeout", "1m", "-o", "json")
	rs3 := &v1alpha1.Restore{}
	if r.code != 2 {
		t.Fatalf("restore of a damaged pack: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustJSON(t, r.stdout, rs3)
	if rs3.Status.Phase != v1alpha1.PhasePartiallyFailed || rs3.Status.PodVolumes == nil || rs3.Status.PodVolumes.Failed == 0 {
		t.Errorf("restore of a damaged pack: %+v %+v", rs3.Status, rs3.Status.PodVolumes)
	}
	desc := run("restore", "describe", "r3")
	if !strings.Contains(desc.stdout, "big.bin") || !strings.Contains(desc.stdout, "invalid checksum at p") {
		t.Errorf("the restore's error does not name the file and the pack:\n%s", desc.stdout)
	}
	p3, err := dst.CoreV1().Pods("vol3").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(hostDst, string(p3.UID), "volumes", "kubernetes.io~csi", "*", "mount"))
	if len(dirs) != 1 {
		t.Fatalf("target data volume dirs: %v", dirs)
	}
	entries, _ := os.ReadDir(dirs[0])
	if len(entries) != 1 || entries[0].Name() != v1alpha1.DoneMarkerDir {
		t.Errorf("a failed volume restore left data in the volume: %v", entries)
	}
	if _, err := os.Stat(volumes.MarkerPath(dirs[0], string(rs3.UID))); err == nil {
		t.Errorf("a failed volume restore wrote its done-marker")
	}

	// A damaged index blob as well (the newest): verify still opens the
	// repository, names the blob and what it recovered from the packs, and
	// still fails the volume whose pack is damaged.
	var index string
	var newest time.Time
	_ = filepath.WalkDir(filepath.Join(storeDir, "volumes"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "xn") {
			if st, _ := d.Info(); st.ModTime().After(newest) {
				index, newest = p, st.ModTime()
			}
		}
		return nil
	})
	data, err = os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x5a
	if err := os.WriteFile(index, data, 0o644); err != nil {
		t.Fatal(err)
	}
	v = run("backup", "verify", "b2")
	if v.code != 1 || !strings.Contains(v.stdout, "index blob volumes/"+filepath.Base(index)+" is damaged") ||
		!strings.Contains(v.stdout, "Volume repository index recovered from") || !strings.Contains(v.stdout, "big.bin: ") {
		t.Errorf("verify with a damaged index blob: exit %d\n%s\n%s", v.code, v.stdout, v.stderr)
	}
}

// noPlaintext reads every file under dir (there must be some) and fails
// the test for each that holds one of the plaintexts.
func noPlaintext(t *testing.T, dir string, plaintexts ...string) {
	t.Helper()
	read := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		read++
		for _, s := range plaintexts {
			if strings.Contains(string(data), s) {
				t.Errorf("%s holds plaintext of the volume data (%q)", p, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the store %s: %v", dir, err)
	}
	if read == 0 {
		t.Fatalf("the store %s holds no file to look for plaintext in", dir)
	}
	t.Logf("no plaintext in the %d files of the store %s", read, dir)
}

// createVolumePod creates a statically bound PV/PVC pair and a pod
// mounting the claim (data), an emptyDir (cache) and a ConfigMap
// (config), annotated to back up data and cache.
func createVolumePod(t *testing.T, cs kubernetes.Interface, ns, name, pv string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	claim := name + "-data"
	_, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "manual",
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "disk.csi.example.com", VolumeHandle: pv}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc := "manual"
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &sc, VolumeName: pv,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitClaimBound(t, cs, ns, claim)
	p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{v1alpha1.AnnotationBackupVolumes: "data,cache,config"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "busybox:1.37", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "cache", MountPath: "/cache"}}}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitClaimBound(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	for i := 0; i < 120; i++ {
		pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && pvc.Status.Phase == corev1.ClaimBound {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("claim %s/%s never bound", ns, name)
}

// TestNodeAgent: a restore with --volumes-by-node-agent only makes the pod
// wait; ferry node-agent on the (stand-in) node then restores its data.
func TestNodeAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	env := []string{volumes.EnvPassword + "=" + volumePassword}
	run := func(args ...string) result {
		return ferry(t, env, append(args, "--kubeconfig", e.kubeconfig, "--storage", e.storage)...)
	}
	ctx := context.Background()
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	createNamespace(t, src, "na")
	pod := createVolumePod(t, src, "na", "db", "pv-db")
	hostSrc, hostDst := t.TempDir(), t.TempDir()
	dataDir := filepath.Join(hostSrc, string(pod.UID), "volumes", "kubernetes.io~csi", "pv-db", "mount")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := volumetest.MakeTree(dataDir, volumetest.TreeOptions{BigFile: 5 << 20, SmallFiles: 200, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	if r := run("backup", "create", "nb", "--context", "src", "--include-namespaces", "na", "--host-pods-dir", hostSrc); r.code != 2 {
		// cache has no directory: PartiallyFailed, data is backed up.
		t.Fatalf("backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r := run("restore", "create", "nr", "--from-backup", "nb", "--context", "dst", "--volumes-by-node-agent", "-o", "json")
	if r.code != 0 {
		t.Fatalf("restore: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	rs := &v1alpha1.Restore{}
	mustJSON(t, r.stdout, rs)
	if rs.Status.PodVolumes == nil || rs.Status.PodVolumes.Deferred != 1 {
		t.Fatalf("restore volumes: %+v", rs.Status.PodVolumes)
	}
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	go testenv.FakeKubelet(kctx, dst, "na", "", hostDst)
	a := ferry(t, env, "node-agent", "--host-pods-dir", hostDst, "--once", "--volume-timeout", "1m", "--kubeconfig", e.kubeconfig, "--context", "dst", "--storage", e.storage)
	if a.code != 0 || !strings.Contains(a.stdout, "pod na/db: 1 restored") {
		t.Fatalf("node-agent: exit %d\n%s\n%s", a.code, a.stdout, a.stderr)
	}
	got, err := dst.CoreV1().Pods("na").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(hostDst, string(got.UID), "volumes", "kubernetes.io~csi", "pv-db", "mount")
	if diffs, err := volumetest.Compare(dataDir, to, v1alpha1.DoneMarkerDir); err != nil || len(diffs) > 0 {
		t.Fatalf("node agent restored differently: %v %v", err, diffs)
	}
	if _, err := os.Stat(volumes.MarkerPath(to, string(rs.UID))); err != nil {
		t.Errorf("done-marker: %v", err)
	}
	// Nothing left to do: a second pass restores nothing.
	a = ferry(t, env, "node-agent", "--host-pods-dir", hostDst, "--once", "--kubeconfig", e.kubeconfig, "--context", "dst", "--storage", e.storage)
	if a.code != 0 || strings.Contains(a.stdout, "restored") {
		t.Errorf("second node-agent pass: exit %d %s", a.code, a.stdout)
	}

	// A restore that left its pods waiting (no node agent came) is
	// finished by a second restore of the same backup: it writes the
	// done-marker the pods wait for, the first restore's, not its own
	// (which once left them waiting for ever).
	createNamespace(t, src, "twice")
	web, err := src.CoreV1().Pods("twice").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{v1alpha1.AnnotationBackupVolumes: "cache"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.37"}},
			Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cacheSrc := filepath.Join(hostSrc, string(web.UID), "volumes", "kubernetes.io~empty-dir", "cache")
	if err := os.MkdirAll(cacheSrc, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := volumetest.MakeTree(cacheSrc, volumetest.TreeOptions{SmallFiles: 20, Seed: 4}); err != nil {
		t.Fatal(err)
	}
	if r := run("backup", "create", "tw", "--context", "src", "--include-namespaces", "twice", "--host-pods-dir", hostSrc); r.code != 0 {
		t.Fatalf("backup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = run("restore", "create", "tw1", "--from-backup", "tw", "--context", "dst", "--volumes-by-node-agent", "-o", "json")
	first := &v1alpha1.Restore{}
	mustJSON(t, r.stdout, first)
	go testenv.FakeKubelet(kctx, dst, "twice", "", hostDst)
	r = run("restore", "create", "tw2", "--from-backup", "tw", "--context", "dst", "--host-pods-dir", hostDst, "--volume-timeout", "1m", "-o", "json")
	second := &v1alpha1.Restore{}
	mustJSON(t, r.stdout, second)
	if r.code != 0 || second.Status.PodVolumes == nil || second.Status.PodVolumes.Completed != 1 {
		t.Fatalf("second restore: exit %d %+v\n%s", r.code, second.Status.PodVolumes, r.stderr)
	}
	webDst, err := dst.CoreV1().Pods("twice").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cacheDst := filepath.Join(hostDst, string(webDst.UID), "volumes", "kubernetes.io~empty-dir", "cache")
	if _, err := os.Stat(volumes.MarkerPath(cacheDst, string(first.UID))); err != nil {
		t.Errorf("the marker the pod waits for (restore tw1's): %v", err)
	}
	if diffs, err := volumetest.Compare(cacheSrc, cacheDst, v1alpha1.DoneMarkerDir); err != nil || len(diffs) > 0 {
		t.Errorf("restored differently: %v %v", err, diffs)
	}

	// A backup with --host-pods-dir that finds no volume to back up writes
	// an empty volume record; its restore with --host-pods-dir once
	// panicked on it (found by the server-mode test).
	createNamespace(t, src, "novols")
	if _, err := src.CoreV1().ConfigMaps("novols").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := run("backup", "create", "nv", "--context", "src", "--include-namespaces", "novols", "--host-pods-dir", hostSrc); r.code != 0 {
		t.Fatalf("backup without volumes: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := run("restore", "create", "nvr", "--from-backup", "nv", "--context", "dst", "--host-pods-dir", hostDst); r.code != 0 {
		t.Fatalf("restore without volumes: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := dst.CoreV1().ConfigMaps("novols").Get(ctx, "c", metav1.GetOptions{}); err != nil {
		t.Errorf("restored ConfigMap: %v", err)
	}
}
