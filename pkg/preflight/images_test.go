package preflight

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/images"
)

// deployment is a Deployment of ns whose containers run refs.
func deployment(ns, name string, refs ...string) *appsv1.Deployment {
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for i, r := range refs {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: r})
	}
	return d
}

// TestUnreachableRegistryAskedOnce: a registry that never answers is
// asked by the first images' workers only; once one of them timed out,
// the registry's other images are not asked (each would wait out its
// own timeout), and Skipped names the registry with all its images,
// no risk. (Before: each image waited out a timeout of its own.)
func TestUnreachableRegistryAskedOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			defer c.Close() // held open, never answered
		}
	}()
	defer func(d time.Duration) { imageTimeout = d }(imageTimeout)
	imageTimeout = time.Second
	var refs []string
	for i := 0; i < 40; i++ {
		refs = append(refs, fmt.Sprintf("%s/app/img%02d:1", l.Addr(), i))
	}
	e := newTestEnv(t, deployment("shop", "web", refs...))
	e.o.Images = images.Options{Insecure: true}
	start := time.Now()
	checkImages(context.Background(), e)
	took := time.Since(start)
	if len(e.p.Risks) != 0 {
		t.Errorf("risks %+v, want none (an unreachable registry is not checked)", e.p.Risks)
	}
	want := fmt.Sprintf("images of registry %s (40): unreachable", l.Addr())
	if len(e.p.Skipped) != 1 || !strings.HasPrefix(e.p.Skipped[0], want) {
		t.Errorf("skipped %q, want one saying %q", e.p.Skipped, want)
	}
	if took > 8*imageTimeout {
		t.Errorf("the check took %s for 40 images of an unreachable registry: asked one by one", took)
	}
	t.Logf("%d connections, %s", conns.Load(), took)
}

// TestPushImagesSkipsPullCheck: with spec.pushImages the images are not
// in their mapped registries before the restore pushes them: the check
// says so and finds no risk in it.
func TestPushImagesSkipsPullCheck(t *testing.T) {
	e := newTestEnv(t, deployment("shop", "web", "registry.invalid/app/web:1"))
	e.o.Restore.Spec.PushImages = true
	checkImages(context.Background(), e)
	if len(e.p.Risks) != 0 || len(e.p.Skipped) != 1 || !strings.Contains(e.p.Skipped[0], "spec.pushImages") {
		t.Errorf("risks %+v, skipped %q; want none, and the skip saying spec.pushImages", e.p.Risks, e.p.Skipped)
	}
}
