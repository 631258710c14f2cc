package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/images"
)

// workloadsYAML has one object of every workload kind in namespace ns;
// {{A}} is the image of each kind's main container, {{I}} that of its
// init container.
const workloadsYAML = `apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  initContainers: [{name: init, image: "{{I}}pod-init:1"}]
  containers: [{name: app, image: "{{A}}pod:1"}]
---
apiVersion: v1
kind: ReplicationController
metadata: {name: rc}
spec:
  replicas: 0
  selector: {app: rc}
  template:
    metadata: {labels: {app: rc}}
    spec:
      initContainers: [{name: init, image: "{{I}}rc-init:1"}]
      containers: [{name: app, image: "{{A}}rc:1"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: deploy}
spec:
  replicas: 0
  selector: {matchLabels: {app: deploy}}
  template:
    metadata: {labels: {app: deploy}}
    spec:
      initContainers: [{name: init, image: "{{I}}deploy-init:1"}]
      containers: [{name: app, image: "{{A}}deploy:1"}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 0
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec:
      initContainers: [{name: init, image: "{{I}}rs-init:1"}]
      containers: [{name: app, image: "{{A}}rs:1"}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sts}
spec:
  replicas: 0
  serviceName: sts
  selector: {matchLabels: {app: sts}}
  template:
    metadata: {labels: {app: sts}}
    spec:
      initContainers: [{name: init, image: "{{I}}sts-init:1"}]
      containers: [{name: app, image: "{{A}}sts:1"}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds}
spec:
  selector: {matchLabels: {app: ds}}
  template:
    metadata: {labels: {app: ds}}
    spec:
      initContainers: [{name: init, image: "{{I}}ds-init:1"}]
      containers: [{name: app, image: "{{A}}ds:1"}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: job}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      initContainers: [{name: init, image: "{{I}}job-init:1"}]
      containers: [{name: app, image: "{{A}}job:1"}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: cron}
spec:
  schedule: "0 0 1 1 *"
  suspend: true
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          initContainers: [{name: init, image: "{{I}}cron-init:1"}]
          containers: [{name: app, image: "{{A}}cron:1"}]
`

var workloadGVRs = map[string]schema.GroupVersionResource{
	"Pod":                   {Version: "v1", Resource: "pods"},
	"ReplicationController": {Version: "v1", Resource: "replicationcontrollers"},
	"Deployment":            {Group: "apps", Version: "v1", Resource: "deployments"},
	"ReplicaSet":            {Group: "apps", Version: "v1", Resource: "replicasets"},
	"StatefulSet":           {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"DaemonSet":             {Group: "apps", Version: "v1", Resource: "daemonsets"},
	"Job":                   {Group: "batch", Version: "v1", Resource: "jobs"},
	"CronJob":               {Group: "batch", Version: "v1", Resource: "cronjobs"},
}

var workloadNames = map[string]string{"Pod": "pod", "ReplicationController": "rc", "Deployment": "deploy", "ReplicaSet": "rs", "StatefulSet": "sts", "DaemonSet": "ds", "Job": "job", "CronJob": "cron"}

func applyWorkloads(t *testing.T, cfg *rest.Config, ns, mainPrefix, initPrefix string, extra string) {
	t.Helper()
	body := strings.ReplaceAll(strings.ReplaceAll(workloadsYAML, "{{A}}", mainPrefix), "{{I}}", initPrefix) + extra
	f := filepath.Join(t.TempDir(), "workloads.yaml")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Apply(context.Background(), cfg, ns, f); err != nil {
		t.Fatal(err)
	}
}

// imagesIn returns the images of every workload in ns, by "Kind/field".
func imagesIn(t *testing.T, cfg *rest.Config, ns string) map[string]string {
	t.Helper()
	dc := dynamic.NewForConfigOrDie(cfg)
	out := map[string]string{}
	for kind, gvr := range workloadGVRs {
		u, err := dc.Resource(gvr).Namespace(ns).Get(context.Background(), workloadNames[kind], metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s %s/%s: %v", kind, ns, workloadNames[kind], err)
		}
		for _, f := range images.Find(u.Object) {
			out[kind+"/"+f.Use.Field] = f.Reference
		}
	}
	return out
}

// TestImageRewrite restores every workload kind with
// --image-registry-mappings: main containers' images are under the
// mapping and rewritten; init containers' images are not and stay; a
// malformed reference is reported naming its object and left as it is.
func TestImageRewrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	const bad = `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: bad}
spec:
  replicas: 0
  selector: {matchLabels: {app: bad}}
  template:
    metadata: {labels: {app: bad}}
    spec:
      containers: [{name: app, image: "old.example.com/shop/Bad_Name:1"}, {name: side, image: "old.example.com/shop/side:2"}]
`
	applyWorkloads(t, e.src.Config, "shop", "old.example.com/shop/", "quay.io/other/", bad)
	b := e.backup(t, "rw", "--include-namespaces", "shop", "--images", "none")
	if b.Status.Images != nil {
		t.Errorf("--images=none recorded images: %+v", b.Status.Images)
	}
	rs, r := e.restore(t, "rw", "rw", "--image-registry-mappings", "old.example.com/shop=registry.new.example.com:5000/mirror/shop")
	if r.code != 0 || rs.Status.Counts.Failed != 0 {
		t.Fatalf("restore: exit %d %+v\n%s\n%s", r.code, rs.Status.Counts, r.stdout, r.stderr)
	}
	got := imagesIn(t, e.dst.Config, "shop")
	if len(got) != 16 {
		t.Errorf("found %d images in the target, want 16: %v", len(got), got)
	}
	for kind, name := range workloadNames {
		if want := "registry.new.example.com:5000/mirror/shop/" + name + ":1"; got[kind+"/containers"] != want {
			t.Errorf("%s: image %q, want %q", kind, got[kind+"/containers"], want)
		}
		if want := "quay.io/other/" + name + "-init:1"; got[kind+"/initContainers"] != want {
			t.Errorf("%s init: image %q, want it untouched: %q", kind, got[kind+"/initContainers"], want)
		}
	}
	dc := dynamic.NewForConfigOrDie(e.dst.Config)
	u, err := dc.Resource(workloadGVRs["Deployment"]).Namespace("shop").Get(context.Background(), "bad", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs := images.Find(u.Object)
	if len(fs) != 2 || fs[0].Reference != "old.example.com/shop/Bad_Name:1" || fs[1].Reference != "registry.new.example.com:5000/mirror/shop/side:2" {
		t.Errorf("Deployment bad: images %v; want the malformed one untouched and the other rewritten", fs)
	}
	desc := e.run(t, "restore", "describe", "rw")
	if !strings.Contains(desc.stdout, `Deployment shop/bad containers[app]: image "old.example.com/shop/Bad_Name:1": malformed reference`) {
		t.Errorf("restore describe does not name the malformed image:\n%s", desc.stdout)
	}
}

// TestImageBundle backs up images into the store (--images=bundle),
// backs them up again (no new blob), and restores with --push-images into
// an empty registry: every image is pullable there by digest, and the
// workloads point at it, digest pinned.
func TestImageBundle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	regs := startRegistries(t, testenv.RegistryOptions{}, testenv.RegistryOptions{})
	src, dst := regs[0], regs[1]
	digests := map[string]v1.Hash{}
	for _, name := range workloadNames {
		var err error
		if name == "deploy" {
			idx, err := src.PushIndex("shop/"+name+":1", "linux/amd64", "linux/arm64")
			if err != nil {
				t.Fatal(err)
			}
			digests[name], _ = idx.Digest()
			continue
		}
		img, err := src.PushImage("shop/"+name+":1", 32<<10, 2)
		if err != nil {
			t.Fatal(err)
		}
		digests[name], _ = img.Digest()
	}
	// Main containers from the source registry; init containers from one
	// that does not exist (a warning each, the backup still completes).
	applyWorkloads(t, e.src.Config, "shop", src.Host+"/shop/", "127.0.0.1:1/gone/", "")
	blobs := func() int {
		n := 0
		_ = filepath.Walk(filepath.Join(strings.TrimPrefix(e.storage, "file://"), "images", "blobs", "sha256"), func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				n++
			}
			return nil
		})
		return n
	}
	b1 := e.backup(t, "b1", "--include-namespaces", "shop", "--images", "bundle", "--image-retries", "1")
	s1 := b1.Status.Images
	if s1 == nil || s1.Images != 16 || s1.Failed != 8 || s1.BlobsWritten == 0 || b1.Status.Phase != "Completed" {
		t.Fatalf("first bundle backup: phase %s, images %+v", b1.Status.Phase, s1)
	}
	n1 := blobs()
	if int64(n1) != s1.BlobsWritten {
		t.Errorf("%d blob files in the store, the backup says it wrote %d", n1, s1.BlobsWritten)
	}
	b2 := e.backup(t, "b2", "--include-namespaces", "shop", "--images", "bundle", "--image-retries", "1")
	if s2 := b2.Status.Images; s2 == nil || s2.BlobsWritten != 0 || s2.BlobsReused != s1.BlobsWritten || blobs() != n1 {
		t.Errorf("second bundle backup wrote new blobs: %+v; %d blob files, was %d", s2, blobs(), n1)
	}
	t.Logf("bundle: first backup wrote %d blobs (%d bytes), second wrote %d", s1.BlobsWritten, s1.BytesWritten, b2.Status.Images.BlobsWritten)

	// backup verify reads every bundled blob: a damaged one is found,
	// naming the image.
	if v := e.run(t, "backup", "verify", "b2"); v.code != 0 || !strings.Contains(v.stdout, "bundled blobs") {
		t.Fatalf("backup verify: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	refuseTamperedBundle(t, e, src, dst, "b2")

	// Take the source registry away: the restore needs only the store.
	if err := src.Stop(); err != nil {
		t.Fatal(err)
	}
	// --images-required: the 8 init images the bundle lacks fail the
	// restore before any object is written.
	_, r0 := e.restore(t, "r0", "b2", "--push-images", "--images-required", "--image-registry-mappings", src.Host+"/shop="+dst.Host+"/mirror")
	if r0.code != 1 || !strings.Contains(r0.stderr+r0.stdout, "could not be pushed (spec.imagesRequired), nothing was restored") {
		t.Fatalf("--images-required restore: exit %d\n%s\n%s", r0.code, r0.stdout, r0.stderr)
	}
	if _, err := kubernetes.NewForConfigOrDie(e.dst.Config).CoreV1().Namespaces().Get(context.Background(), "shop", metav1.GetOptions{}); err == nil {
		t.Error("a restore failed by --images-required wrote namespace shop")
	}
	rs, r := e.restore(t, "r1", "b2", "--push-images", "--image-registry-mappings", src.Host+"/shop="+dst.Host+"/mirror")
	if r.code != 0 || rs.Status.ImagesPushed != 8 || rs.Status.Counts.Failed != 0 {
		t.Fatalf("restore: exit %d, pushed %d, failed %d, %+v\n%s\n%s", r.code, rs.Status.ImagesPushed, rs.Status.ImagesFailed, rs.Status.Counts, r.stdout, r.stderr)
	}
	checkPushedImages(t, e, dst, digests)
	if desc := e.run(t, "restore", "describe", "r1"); !strings.Contains(desc.stdout, "Warning: image 127.0.0.1:1/gone/cron-init:1 is not in the backup's bundle") {
		t.Errorf("restore describe does not warn about the images missing from the bundle:\n%s", desc.stdout)
	}
}

// pullAll reads every layer of img, as a pull would.
func pullAll(img v1.Image) error {
	ls, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range ls {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	_, err = img.RawConfigFile()
	return err
}

// TestImageCopyMigrate migrates with --images=copy: the backup copies the
// images to the target registry, and the restore points every workload at
// the copies, digest pinned. Images no mapping matches are reported and
// left alone. Then --images-required turns an unreachable image into a
// failed backup.
func TestImageCopyMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	regs := startRegistries(t, testenv.RegistryOptions{}, testenv.RegistryOptions{})
	src, dst := regs[0], regs[1]
	digests := map[string]v1.Hash{}
	for _, name := range workloadNames {
		img, err := src.PushImage("shop/"+name+":1", 16<<10, 2)
		if err != nil {
			t.Fatal(err)
		}
		digests[name], _ = img.Digest()
	}
	bad := `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: bad}
spec:
  replicas: 0
  selector: {matchLabels: {app: bad}}
  template:
    metadata: {labels: {app: bad}}
    spec:
      containers: [{name: app, image: "` + src.Host + `/shop/Bad_Name:1"}, {name: side, image: "` + src.Host + `/shop/deploy:1"}]
`
	applyWorkloads(t, e.src.Config, "shop", src.Host+"/shop/", "quay.io/other/", bad)
	reportDir := filepath.Join(t.TempDir(), "report")
	r := e.run(t, "migrate", "--from-context", "src", "--to-context", "dst", "--name", "mig", "--include-namespaces", "shop",
		"--images", "copy", "--image-registry-mappings", src.Host+"/shop="+dst.Host+"/mirror/shop", "-o", "json",
		"--report-dir", reportDir)
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// The verification expects the rewritten, pinned references (exit 0
	// above means 0 unexpected differences), and its report lists the images.
	var rep struct {
		Images []struct{ Name, Detail, Outcome string } `json:"images"`
	}
	data, err := os.ReadFile(filepath.Join(reportDir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	mustJSON(t, string(data), &rep)
	copied := 0
	for _, im := range rep.Images {
		if im.Outcome == "copied" && strings.HasPrefix(im.Detail, "sha256:") {
			copied++
		}
	}
	if copied != len(workloadNames) {
		t.Errorf("report lists %d copied images with digests, want %d: %+v", copied, len(workloadNames), rep.Images)
	}
	var out struct {
		Backup struct {
			Status struct {
				Images struct{ Images, Failed int } `json:"images"`
			} `json:"status"`
		} `json:"backup"`
	}
	mustJSON(t, r.stdout, &out)
	// 8 unmapped init images, and the malformed reference in Deployment bad
	// and in the ReplicaSet its controller made.
	if s := out.Backup.Status.Images; s.Images != 16 || s.Failed != 10 {
		t.Errorf("backup images: %+v, want 16 images, 10 failures", s)
	}
	dc := dynamic.NewForConfigOrDie(e.dst.Config)
	u, err := dc.Resource(workloadGVRs["Deployment"]).Namespace("shop").Get(context.Background(), "bad", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fs := images.Find(u.Object); len(fs) != 2 || fs[0].Reference != src.Host+"/shop/Bad_Name:1" || fs[1].Reference != dst.Host+"/mirror/shop/deploy:1@"+digests["deploy"].String() {
		t.Errorf("Deployment bad in the target: %v; want the malformed image as it was and the other copied and pinned", fs)
	}
	got := imagesIn(t, e.dst.Config, "shop")
	for kind, name := range workloadNames {
		want := dst.Host + "/mirror/shop/" + name + ":1@" + digests[name].String()
		if got[kind+"/containers"] != want {
			t.Errorf("%s: %q, want %q", kind, got[kind+"/containers"], want)
		}
		if d, ok := dst.Digest("mirror/shop/" + name + ":1"); !ok || d != digests[name] {
			t.Errorf("%s: target registry has %v (%v), want %v", kind, d, ok, digests[name])
		}
		if want := "quay.io/other/" + name + "-init:1"; got[kind+"/initContainers"] != want {
			t.Errorf("%s init: %q, want untouched %q", kind, got[kind+"/initContainers"], want)
		}
	}
	d := e.run(t, "backup", "describe", "mig")
	for _, want := range []string{"Warning: image quay.io/other/cron-init:1: no image registry mapping (spec.imageRegistryMappings) matches it",
		`Warning: image "` + src.Host + `/shop/Bad_Name:1" in Deployment shop/bad containers[app]: malformed reference`} {
		if !strings.Contains(d.stdout, want) {
			t.Errorf("backup describe lacks %q:\n%s", want, d.stdout)
		}
	}

	// --images-required: the unreachable init images fail the backup.
	r = e.run(t, "backup", "create", "req", "--context", "src", "--include-namespaces", "shop", "--images-required", "--image-retries", "1", "-o", "json")
	if r.code != 1 || !strings.Contains(r.stdout, `"phase": "Failed"`) || !strings.Contains(r.stdout, "images failed (spec.imagesRequired)") {
		t.Errorf("--images-required with unreachable images: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, rr := e.restore(t, "req", "req"); rr.code == 0 || !strings.Contains(rr.stderr, "not restorable") {
		t.Errorf("a backup failed by --images-required restores: exit %d %s", rr.code, rr.stderr)
	}
}

// mustLayer returns the hex digest of the first layer of repoTag in r.
func mustLayer(t *testing.T, r *testenv.Registry, repoTag string) string {
	t.Helper()
	img, err := remote.Image(mustParse(t, r.Host+"/"+repoTag))
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return m.Layers[0].Digest.Hex
}

// registryContents lists every repository of r's catalog (/v2/_catalog)
// with its tags (/v2/<repo>/tags/list), as "repo:tag".
func registryContents(t *testing.T, r *testenv.Registry) []string {
	t.Helper()
	ctx := context.Background()
	reg, err := name.NewRegistry(r.Host)
	if err != nil {
		t.Fatal(err)
	}
	repos, err := remote.Catalog(ctx, reg)
	if err != nil {
		t.Fatalf("catalog of %s: %v", r.Host, err)
	}
	out := []string{}
	for _, repo := range repos {
		tags, err := remote.List(reg.Repo(repo), remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("tags of %s/%s: %v", r.Host, repo, err)
		}
		if len(tags) == 0 {
			out = append(out, repo+" (no tags)")
		}
		for _, tag := range tags {
			out = append(out, repo+":"+tag)
		}
	}
	return out
}

// refuseTamperedBundle damages one byte of a layer of backup's bundled
// image shop/rs:1 (head, middle, tail), of its manifest and of its config
// blob, one at a time: backup verify and restore --push-images refuse
// each, naming the image, before anything is pushed to registry dst (its
// catalog stays empty) or written to the target.
func refuseTamperedBundle(t *testing.T, e *env, src, dst *testenv.Registry, backup string) {
	blobDir := filepath.Join(strings.TrimPrefix(e.storage, "file://"), "images", "blobs", "sha256")
	rsImg, err := remote.Image(mustParse(t, src.Host+"/shop/rs:1"))
	if err != nil {
		t.Fatal(err)
	}
	rsManifest, _ := rsImg.Digest()
	rsConfig, _ := rsImg.ConfigName()
	layer := mustLayer(t, src, "shop/rs:1")
	type flip struct {
		blob string
		pos  func(n int) int
	}
	flips := []flip{
		{layer, func(int) int { return 0 }}, {layer, func(n int) int { return n / 2 }}, {layer, func(n int) int { return n - 1 }},
		{rsManifest.Hex, func(n int) int { return n / 2 }}, {rsConfig.Hex, func(n int) int { return n / 3 }},
	}
	cs := kubernetes.NewForConfigOrDie(e.dst.Config)
	if got := registryContents(t, dst); len(got) != 0 {
		t.Fatalf("the target registry is not empty before the restores: %v", got)
	}
	for i, f := range flips {
		path := filepath.Join(blobDir, f.blob)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		damaged := append([]byte(nil), orig...)
		damaged[f.pos(len(damaged))] ^= 0x20
		if err := os.WriteFile(path, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		if v := e.run(t, "backup", "verify", backup); v.code != 1 || !strings.Contains(v.stderr, "image "+src.Host+"/shop/rs:1") || !strings.Contains(v.stderr, f.blob) {
			t.Errorf("flip %d (blob %s): backup verify exit %d\n%s", i, f.blob, v.code, v.stderr)
		}
		_, rr := e.restore(t, fmt.Sprintf("tampered%d", i), backup, "--push-images", "--image-registry-mappings", src.Host+"/shop="+dst.Host+"/mirror")
		if rr.code != 1 || !strings.Contains(rr.stderr, "image "+src.Host+"/shop/rs:1") || !strings.Contains(rr.stderr, "image bundle") {
			t.Errorf("flip %d (blob %s): restore --push-images exit %d\n%s\n%s", i, f.blob, rr.code, rr.stdout, rr.stderr)
		}
		if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "shop", metav1.GetOptions{}); err == nil {
			t.Fatalf("flip %d: a restore of a tampered bundle wrote namespace shop", i)
		}
		// Nothing at all was pushed, not only the tampered image.
		if got := registryContents(t, dst); len(got) != 0 {
			t.Fatalf("flip %d: a restore of a tampered bundle pushed to the target registry: %v", i, got)
		}
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkPushedImages asserts that every workload's main container in the
// target's namespace shop points at its image in registry dst under
// mirror/, pinned to digests[name], and pullable there by digest (every
// blob, every platform of an index); init containers are left as they were.
func checkPushedImages(t *testing.T, e *env, dst *testenv.Registry, digests map[string]v1.Hash) {
	got := imagesIn(t, e.dst.Config, "shop")
	for kind, name := range workloadNames {
		ref := dst.Host + "/mirror/" + name + ":1@" + digests[name].String()
		if got[kind+"/containers"] != ref {
			t.Errorf("%s: image %q, want %q", kind, got[kind+"/containers"], ref)
		}
		// Pullable by digest: every blob is there.
		pr, err := images.ParseReference(dst.Host+"/mirror/"+name+"@"+digests[name].String(), false)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Get(pr)
		if err != nil {
			t.Errorf("%s not in the target registry: %v", ref, err)
			continue
		}
		if desc.MediaType.IsIndex() {
			idx, _ := desc.ImageIndex()
			im, _ := idx.IndexManifest()
			for _, m := range im.Manifests {
				img, err := idx.Image(m.Digest)
				if err == nil {
					err = pullAll(img)
				}
				if err != nil {
					t.Errorf("%s %s: %v", ref, m.Platform, err)
				}
			}
		} else if img, err := desc.Image(); err != nil || pullAll(img) != nil {
			t.Errorf("%s: not pullable: %v", ref, err)
		}
		if g := got[kind+"/initContainers"]; !strings.HasPrefix(g, "127.0.0.1:1/gone/") {
			t.Errorf("%s init: %q changed", kind, g)
		}
	}
}
