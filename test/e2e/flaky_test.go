package e2e

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/internal/testenv"
)

// TestFlakyObjectStore puts a proxy that fails 20% of requests (503 or a
// connection reset) in front of the S3 server: backup and restore still
// complete, and their status counts the retries.
func TestFlakyObjectStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.CreateBucket(ctx, "flaky"); err != nil {
		t.Fatal(err)
	}
	fp := testenv.StartFlakyProxy(t, s3.Endpoint, 0.2, 42)
	storage := fp.S3URL(s3, "flaky")
	if storage == s3.URL("flaky") {
		t.Fatalf("could not point %s at the proxy", storage)
	}

	src := kubernetes.NewForConfigOrDie(e.src.Config)
	createNamespace(t, src, "wobbly")
	createConfigMaps(t, src, "wobbly", 500)
	run := func(args ...string) result {
		return ferry(t, s3.Env(), append(args, "--kubeconfig", e.kubeconfig, "--storage", storage, "-o", "json")...)
	}
	var retried int
	for _, name := range []string{"wobbly-1", "wobbly-2", "wobbly-3", "wobbly-4", "wobbly-5"} {
		b := run("backup", "create", name, "--context", "src", "--include-namespaces", "wobbly")
		if b.code != 0 {
			t.Fatalf("backup %s through the flaky proxy: exit %d\n%s\n%s", name, b.code, b.stdout, b.stderr)
		}
		var bs struct {
			Status struct {
				Phase   string         `json:"phase"`
				Retries map[string]int `json:"retries"`
			} `json:"status"`
		}
		mustJSON(t, b.stdout, &bs)
		r := run("restore", "create", name, "--from-backup", name, "--context", "dst", "--existing-resource-policy", "update")
		if r.code != 0 {
			t.Fatalf("restore %s through the flaky proxy: exit %d\n%s\n%s", name, r.code, r.stdout, r.stderr)
		}
		var rs struct {
			Status struct {
				Phase   string         `json:"phase"`
				Counts  map[string]int `json:"counts"`
				Retries map[string]int `json:"retries"`
			} `json:"status"`
		}
		mustJSON(t, r.stdout, &rs)
		if bs.Status.Phase != "Completed" || rs.Status.Phase != "Completed" || rs.Status.Counts["created"]+rs.Status.Counts["unchanged"] < 500 {
			t.Errorf("%s: backup %s, restore %s %v", name, bs.Status.Phase, rs.Status.Phase, rs.Status.Counts)
		}
		retried += bs.Status.Retries["objectStore"] + rs.Status.Retries["objectStore"]
		t.Logf("%s: backup retries %v, restore retries %v", name, bs.Status.Retries, rs.Status.Retries)
	}
	t.Logf("proxy: %d requests, %d failed on purpose; %d retries counted", fp.Total.Load(), fp.Injured.Load(), retried)
	if fp.Injured.Load() < 3 {
		t.Fatalf("the proxy failed only %d requests: the test proves little", fp.Injured.Load())
	}
	if retried == 0 {
		t.Error("requests failed but no retry was counted")
	}
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	if got := len(sourceData(t, dst, "wobbly")); got != 500 {
		t.Errorf("target has %d ConfigMaps, want 500", got)
	}
}

// TestFlakyRegistryAndStore puts proxies that fail 20% of requests (503 or
// a connection reset) in front of the S3 server and of both registries:
// image sync, a backup that bundles the images into S3, and a restore that
// pushes them to the target registry all complete, every image arrives by
// digest, and the retries are counted.
func TestFlakyRegistryAndStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	ctx := context.Background()
	s3, err := testenv.StartS3(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.CreateBucket(ctx, "flaky"); err != nil {
		t.Fatal(err)
	}
	regs := startRegistries(t, testenv.RegistryOptions{}, testenv.RegistryOptions{})
	srcReg, dstReg := regs[0], regs[1]
	flaky := func(rawURL string, seed int64) (*testenv.FlakyProxy, string) {
		fp := testenv.StartFlakyProxy(t, rawURL, 0.2, seed)
		return fp, fp.URL
	}
	fpS3, s3Proxy := flaky(s3.Endpoint, 1)
	fpSrc, srcProxy := flaky("http://"+srcReg.Host, 2)
	fpDst, dstProxy := flaky("http://"+dstReg.Host, 3)
	storage := strings.Replace(s3.URL("flaky"), s3.Endpoint, s3Proxy, 1)
	srcHost, dstHost := strings.TrimPrefix(srcProxy, "http://"), strings.TrimPrefix(dstProxy, "http://")

	for _, name := range workloadNames {
		for _, repo := range []string{name, name + "-init"} {
			if _, err := srcReg.PushImage("shop/"+repo+":1", 256<<10, 3); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Workloads name the source registry through its flaky proxy.
	applyWorkloads(t, e.src.Config, "shop", srcHost+"/shop/", srcHost+"/shop/", "")
	run := func(args ...string) result {
		return ferry(t, append(s3.Env(), "DOCKER_CONFIG="+t.TempDir()), append(args, "--kubeconfig", e.kubeconfig, "--storage", storage, "-o", "json")...)
	}
	var sync struct {
		Failed  int   `json:"failed"`
		Retries int64 `json:"retries"`
	}
	r := run("image", "sync", "--from", srcHost+"/shop/deploy", "--to", dstHost+"/synced/deploy", "--image-retries", "8")
	if r.code != 0 {
		t.Fatalf("image sync through flaky registries: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustJSON(t, r.stdout, &sync)

	b := run("backup", "create", "fb", "--context", "src", "--include-namespaces", "shop", "--images", "bundle", "--image-retries", "8")
	if b.code != 0 {
		t.Fatalf("backup through flaky S3 and registry: exit %d\n%s\n%s", b.code, b.stdout, b.stderr)
	}
	var bs struct {
		Status struct {
			Phase   string                       `json:"phase"`
			Retries map[string]int64             `json:"retries"`
			Images  struct{ Images, Failed int } `json:"images"`
		} `json:"status"`
	}
	mustJSON(t, b.stdout, &bs)
	if bs.Status.Phase != "Completed" || bs.Status.Images.Images != 2*len(workloadNames) || bs.Status.Images.Failed != 0 {
		t.Fatalf("backup: %+v", bs.Status)
	}
	rr := run("restore", "create", "fr", "--from-backup", "fb", "--context", "dst", "--push-images", "--image-registry-mappings", srcHost+"/shop="+dstHost+"/mirror", "--image-retries", "8")
	if rr.code != 0 {
		t.Fatalf("restore through flaky S3 and registry: exit %d\n%s\n%s", rr.code, rr.stdout, rr.stderr)
	}
	var rs struct {
		Status struct {
			Phase        string           `json:"phase"`
			Retries      map[string]int64 `json:"retries"`
			ImagesPushed int              `json:"imagesPushed"`
		} `json:"status"`
	}
	mustJSON(t, rr.stdout, &rs)
	if rs.Status.Phase != "Completed" || rs.Status.ImagesPushed != 2*len(workloadNames) {
		d := run("restore", "describe", "fr")
		t.Fatalf("restore: %+v\n%s", rs.Status, d.stdout)
	}
	for _, name := range workloadNames {
		want, _ := srcReg.Digest("shop/" + name + ":1")
		if got, ok := dstReg.Digest("mirror/" + name + ":1"); !ok || got != want {
			t.Errorf("mirror/%s:1 in the target registry: %v %v, want %v", name, got, ok, want)
		}
	}
	if want, _ := srcReg.Digest("shop/deploy:1"); true {
		if got, ok := dstReg.Digest("synced/deploy:1"); !ok || got != want {
			t.Errorf("synced/deploy:1: %v %v, want %v", got, ok, want)
		}
	}
	t.Logf("injected failures: S3 %d/%d, source registry %d/%d, target registry %d/%d", fpS3.Injured.Load(), fpS3.Total.Load(), fpSrc.Injured.Load(), fpSrc.Total.Load(), fpDst.Injured.Load(), fpDst.Total.Load())
	t.Logf("retries counted: sync %d; backup %v; restore %v", sync.Retries, bs.Status.Retries, rs.Status.Retries)
	if fpS3.Injured.Load() == 0 || fpSrc.Injured.Load() == 0 || fpDst.Injured.Load() == 0 {
		t.Fatal("a proxy injected no failure: the test proves little")
	}
	if sync.Retries == 0 || bs.Status.Retries["registry"] == 0 || rs.Status.Retries["registry"] == 0 || bs.Status.Retries["objectStore"]+rs.Status.Retries["objectStore"] == 0 {
		t.Errorf("failures were injected but retries not counted: sync %d, backup %v, restore %v", sync.Retries, bs.Status.Retries, rs.Status.Retries)
	}
}
