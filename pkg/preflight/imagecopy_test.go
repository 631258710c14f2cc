package preflight

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/report"
)

// TestImagesCopied: when the move copies images, the check resolves each
// at the source's registry (the registry mappings reversed), says which
// the copy cannot find, and counts the bytes it moves; the pull-rate
// probe reads one of its blobs. An in-process registry (a unit test).
func TestImagesCopied(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	src := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(512<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(src + "/shop/app:1")
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t)
	e.o.Backup.Spec.Images = images.ModeCopy
	e.o.Restore.Spec.ImageRegistryMappings = []string{src + "/shop=target.example:5000/shop"}
	e.c.workloads = []workload{
		{resource: "deployments.apps", namespace: "a", name: "app", kind: "Deployment", replicas: 1, spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "target.example:5000/shop/app:1@sha256:" + strings.Repeat("a", 64)}}}},
		{resource: "deployments.apps", namespace: "a", name: "gone", kind: "Deployment", replicas: 1, spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "target.example:5000/shop/gone:1"}}}},
	}
	if got := e.sourceRef("target.example:5000/shop/app:1@sha256:" + strings.Repeat("a", 64)); got != src+"/shop/app:1" {
		t.Errorf("sourceRef: %s, want %s/shop/app:1 (the copy's digest dropped, the tag kept)", got, src)
	}
	checkImages(context.Background(), e)
	if len(e.p.Risks) != 1 || e.p.Risks[0].Severity != report.Blocker || e.p.Risks[0].Objects[0] != "deployments.apps a/gone" ||
		!strings.Contains(e.p.Risks[0].What, "is copied from "+src+"/shop/gone:1, which is not in its registry") {
		t.Errorf("risks %+v; want one blocker for gone", e.p.Risks)
	}
	layers, _ := img.Layers()
	var want int64
	for _, l := range layers {
		n, _ := l.Size()
		want += n
	}
	cfg, _ := img.RawConfigFile()
	want += int64(len(cfg))
	if e.copied.images != 1 || e.copied.total() != want {
		t.Errorf("copied %d image(s), %d bytes; want 1 and %d (its layers and config)", e.copied.images, e.copied.total(), want)
	}
	rate, read, err := probePullRate(context.Background(), e.copied, images.Options{})
	if err != nil || rate <= 0 || read <= 0 {
		t.Errorf("pull probe: %v B/s, %d bytes read, %v", rate, read, err)
	}
}
