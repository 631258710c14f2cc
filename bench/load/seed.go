package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// ---------------------------------------------------------------- seeding

// mix is the share (percent) of each kind in the seeded objects; the last
// kind takes the rounding remainder.
var mix = []struct {
	resource string
	percent  int
}{
	{"widgets", 10},
	{"configmaps", 40},
	{"secrets", 26},
	{"deployments", 12},
	{"services", 12},
}

// mixCounts splits objects over the kinds of mix.
func mixCounts(objects int) map[string]int {
	counts := map[string]int{}
	left := objects
	for i, k := range mix {
		n := objects * k.percent / 100
		if i == len(mix)-1 {
			n = left
		}
		counts[k.resource] = n
		left -= n
	}
	return counts
}

// seeder creates the load objects: the source's seed, and the raw CREATE
// reference (rawCreate), with the same objects. Each object is one POST
// of its JSON through client-go's REST client, the answer checked for an
// error but not decoded: the request ferry's restore makes
// (pkg/restore/apply.go, create).
type seeder struct {
	rc             rest.Interface
	dyn            dynamic.Interface
	nss            []string
	counts         map[string]int
	clusterIPPerNS int

	clusterIP, headless, rangeFull, retries atomic.Int64
}

// newSeeder returns a seeder for the cluster at cfg (client-side rate
// limiting off) and the given size.
func newSeeder(cfg *rest.Config, namespaces, objects, clusterIPPerNS int) (*seeder, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rcfg := rest.CopyConfig(cfg)
	rcfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(rcfg)
	if err != nil {
		return nil, err
	}
	s := &seeder{rc: rc, dyn: dyn, counts: mixCounts(objects), clusterIPPerNS: clusterIPPerNS}
	for i := range namespaces {
		s.nss = append(s.nss, nsName(i))
	}
	return s, nil
}

func seed(ctx context.Context, cfg *rest.Config, o options) (Seed, error) {
	s, err := newSeeder(cfg, o.namespaces, o.objects, o.clusterIPPerNS)
	if err != nil {
		return Seed{}, err
	}
	start := time.Now()
	// The CRD and the namespaces first, concurrently.
	var crdErr error
	var wg sync.WaitGroup
	wg.Go(func() { crdErr = createCRD(ctx, s.dyn) })
	nsErr := parallel(ctx, o.workers, len(s.nss), s.createNamespace)
	wg.Wait()
	if err := errors.Join(crdErr, nsErr); err != nil {
		return Seed{}, err
	}
	logf("CRD %s established and %d namespaces created after %.1fs", crdName, len(s.nss), time.Since(start).Seconds())

	// Then every object, the kinds interleaved.
	type task struct {
		resource string
		i        int
	}
	var tasks []task
	for i := 0; ; i++ {
		more := false
		for _, k := range mix {
			if i < s.counts[k.resource] {
				tasks = append(tasks, task{k.resource, i})
				more = true
			}
		}
		if !more {
			break
		}
	}
	var done atomic.Int64
	stopProgress := progress("seeded", &done, len(tasks))
	err = parallel(ctx, o.workers, len(tasks), func(ctx context.Context, i int) error {
		t := tasks[i]
		if err := s.createObject(ctx, t.resource, t.i); err != nil {
			return err
		}
		done.Add(1)
		return nil
	})
	stopProgress()
	if err != nil {
		return Seed{}, err
	}
	secs := time.Since(start).Seconds()
	return Seed{
		Namespaces: len(s.nss), Objects: s.counts, Total: len(tasks), Seconds: secs,
		PerSecond: float64(len(tasks)) / secs, Workers: o.workers,
		ClusterIPServices: int(s.clusterIP.Load()), HeadlessServices: int(s.headless.Load()),
		RangeFullFallbacks: int(s.rangeFull.Load()), Retries: int(s.retries.Load()),
	}, nil
}

// parallel runs fn(0..n-1) on w goroutines and returns the first error,
// cancelling the others.
func parallel(ctx context.Context, w, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range w {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// retry calls create up to 6 times while it fails with an error other than
// a validation error, with a growing pause. An AlreadyExists after a failed
// attempt means that attempt went through.
func (s *seeder) retry(ctx context.Context, create func() error) error {
	var err error
	for attempt := range 6 {
		if attempt > 0 {
			s.retries.Add(1)
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
			}
		}
		err = create()
		switch {
		case err == nil:
			return nil
		case attempt > 0 && apierrors.IsAlreadyExists(err):
			return nil
		case apierrors.IsInvalid(err), apierrors.IsAlreadyExists(err), apierrors.IsBadRequest(err), ctx.Err() != nil:
			return err
		}
	}
	return err
}

// post creates obj in the collection at path.
func (s *seeder) post(ctx context.Context, path string, obj any) error {
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return s.rc.Post().AbsPath(path).SetHeader("Content-Type", "application/json").
		SetHeader("Accept", "application/json").Body(body).Do(ctx).Error()
}

// createNamespace creates load namespace i (with retries).
func (s *seeder) createNamespace(ctx context.Context, i int) error {
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: s.nss[i], Labels: map[string]string{"app": appLabel}},
	}
	if err := s.retry(ctx, func() error { return s.post(ctx, "/api/v1/namespaces", ns) }); err != nil {
		return fmt.Errorf("create namespace %s: %w", s.nss[i], err)
	}
	return nil
}

// createObject creates object i of res (with retries).
func (s *seeder) createObject(ctx context.Context, res string, i int) error {
	return s.retry(ctx, func() error { return s.create(ctx, res, i) })
}

// create creates object i of resource in namespace i mod N.
func (s *seeder) create(ctx context.Context, res string, i int) error {
	ns := s.nss[i%len(s.nss)]
	j := i / len(s.nss) // index inside the namespace
	core := "/api/v1/namespaces/" + ns + "/"
	var err error
	switch res {
	case "widgets":
		err = s.post(ctx, "/apis/load.ferry.dev/v1/namespaces/"+ns+"/widgets", widget(ns, i).Object)
	case "configmaps":
		err = s.post(ctx, core+res, configMap(ns, i))
	case "secrets":
		err = s.post(ctx, core+res, secret(ns, i))
	case "deployments":
		err = s.post(ctx, "/apis/apps/v1/namespaces/"+ns+"/deployments", deployment(ns, i, j))
	case "services":
		err = s.createService(ctx, service(ns, i, j, j < s.clusterIPPerNS))
	default:
		err = fmt.Errorf("unknown resource %q", res)
	}
	if err != nil {
		return fmt.Errorf("create %s %s/%d: %w", res, ns, i, err)
	}
	return nil
}

// createService creates svc; a ClusterIP Service refused with "range is
// full" is created headless instead.
func (s *seeder) createService(ctx context.Context, svc *corev1.Service) error {
	path := "/api/v1/namespaces/" + svc.Namespace + "/services"
	err := s.post(ctx, path, svc)
	if err != nil && svc.Spec.ClusterIP == "" && strings.Contains(err.Error(), "range is full") {
		s.rangeFull.Add(1)
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		err = s.post(ctx, path, svc)
	}
	if err == nil {
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			s.headless.Add(1)
		} else {
			s.clusterIP.Add(1)
		}
	}
	return err
}

const crdYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.load.ferry.dev
spec:
  group: load.ferry.dev
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size:
                type: integer
                minimum: 0
              color:
                type: string
              owner:
                type: string
              tags:
                type: array
                items:
                  type: string
          status:
            type: object
            properties:
              ready:
                type: boolean
              observedSize:
                type: integer
`

// createCRD creates the Widget CRD and waits until it is Established.
func createCRD(ctx context.Context, dyn dynamic.Interface) error {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(crdYAML), &u.Object); err != nil {
		return err
	}
	if _, err := dyn.Resource(gvrCRDs).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create CRD %s: %w", crdName, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := dyn.Resource(gvrCRDs).Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get CRD %s: %w", crdName, err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if cm, ok := c.(map[string]any); ok && cm["type"] == "Established" && cm["status"] == "True" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s not Established after 60s: conditions %v", crdName, conds)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var colors = []string{"red", "green", "blue", "amber", "violet"}

func widget(ns string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "load.ferry.dev/v1",
		"kind":       "Widget",
		"metadata": map[string]any{
			"name": objectName("widgets", i), "namespace": ns,
			"labels": map[string]any{"app": appLabel, "color": colors[i%len(colors)]},
		},
		"spec": map[string]any{
			"size":  int64(i),
			"color": colors[i%len(colors)],
			"owner": fmt.Sprintf("team-%d", i%17),
			"tags":  []any{"load", fmt.Sprintf("batch-%d", i%50)},
		},
	}}
}

func configMap(ns string, i int) *corev1.ConfigMap {
	data := map[string]string{}
	for k := range 4 {
		line := fmt.Sprintf("configmap %d key %d ", i, k)
		data[fmt.Sprintf("key%d", k)] = strings.Repeat(line, 256/len(line)+1)[:256]
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: objectName("configmaps", i), Namespace: ns, Labels: map[string]string{"app": appLabel}},
		Data:       data,
	}
}

func secret(ns string, i int) *corev1.Secret {
	token := fmt.Sprintf("token-%d-", i)
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: objectName("secrets", i), Namespace: ns, Labels: map[string]string{"app": appLabel}},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"username": []byte(fmt.Sprintf("user-%d", i)),
			"password": []byte(fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15)),
			"token":    []byte(strings.Repeat(token, 200/len(token)+1)[:200]),
		},
	}
}

func deployment(ns string, i, j int) *appsv1.Deployment {
	app := fmt.Sprintf("web-%d", j)
	labels := map[string]string{"app": app, "part-of": appLabel}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: objectName("deployments", i), Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "web",
					Image: "nginx:1.27",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Env:   []corev1.EnvVar{{Name: "INSTANCE", Value: fmt.Sprint(i)}},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("10m"),
						corev1.ResourceMemory: resource.MustParse("16Mi"),
					}},
				}}},
			},
		},
	}
}

func service(ns string, i, j int, clusterIP bool) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: objectName("services", i), Namespace: ns, Labels: map[string]string{"app": appLabel}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": fmt.Sprintf("web-%d", j)},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if !clusterIP {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return svc
}
