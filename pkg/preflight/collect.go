package preflight

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
)

// kept are the kinds ("group/Kind") whose objects the checks read, kept
// whole; of the others only the count and namespace are.
var kept = map[string]bool{
	"/PersistentVolumeClaim": true, "/PersistentVolume": true, "storage.k8s.io/StorageClass": true,
	"/ResourceQuota": true, "/LimitRange": true, "/Namespace": true, "/Service": true, "/ServiceAccount": true,
	"networking.k8s.io/Ingress": true, "networking.k8s.io/IngressClass": true,
	"admissionregistration.k8s.io/ValidatingWebhookConfiguration": true, "admissionregistration.k8s.io/MutatingWebhookConfiguration": true,
	"apiregistration.k8s.io/APIService": true, "apiextensions.k8s.io/CustomResourceDefinition": true, "policy/PodDisruptionBudget": true,
	// Image signature policies (checkImagePolicies).
	"kyverno.io/ClusterPolicy": true, "kyverno.io/Policy": true, "policy.sigstore.dev/ClusterImagePolicy": true,
}

// collector keeps what the dry-run restore would write (restore.Options.OnDryRun).
type collector struct {
	mu    sync.Mutex
	count int
	// byKind holds the kept objects by "group/Kind".
	byKind map[string][]*unstructured.Unstructured
	// workloads are the objects with a pod template (or a pod spec).
	workloads []workload
	// pullSecrets are the planned Secrets of a docker config type, by
	// "namespace/name".
	pullSecrets map[string]*unstructured.Unstructured
	// namespaces counts the planned objects per target namespace.
	namespaces map[string]int
	// byResource counts the planned objects per group-resource and
	// namespace, for the admission webhooks' rules.
	byResource map[string]map[string]int
	// sample is a uniform sample of the planned namespaced objects (a
	// reservoir of sampleSize), for the create-rate probe.
	sample []sampled
	seen   int
	// resources are the group-resources of the kept objects.
	resources map[*unstructured.Unstructured]string
}

// sampleSize is how many planned objects the create-rate probe sends.
const sampleSize = 256

// sampled is one object of the sample, with the resource it is created as.
type sampled struct {
	gvr schema.GroupVersionResource
	u   *unstructured.Unstructured
}

func newCollector() *collector {
	return &collector{byKind: map[string][]*unstructured.Unstructured{}, pullSecrets: map[string]*unstructured.Unstructured{},
		namespaces: map[string]int{}, byResource: map[string]map[string]int{}, resources: map[*unstructured.Unstructured]string{}}
}

// observe is restore.Options.OnDryRun.
func (c *collector) observe(gr string, u *unstructured.Unstructured) {
	gvk := u.GroupVersionKind()
	key := gvk.Group + "/" + gvk.Kind
	var w *workload
	if path, ok := kube.PodSpecPathOf(gvk.Group, gvk.Kind); ok {
		w = newWorkload(gr, u, path)
	}
	var keep *unstructured.Unstructured
	if kept[key] || (key == "/Secret" && isPullSecret(u)) {
		keep = u.DeepCopy()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count++
	ns := u.GetNamespace()
	if ns != "" {
		c.namespaces[ns]++
	}
	if c.byResource[gr] == nil {
		c.byResource[gr] = map[string]int{}
	}
	c.byResource[gr][ns]++
	if w != nil {
		c.workloads = append(c.workloads, *w)
	}
	if ns != "" {
		c.addSample(gr, u)
	}
	switch {
	case keep == nil:
	case key == "/Secret":
		c.pullSecrets[ns+"/"+u.GetName()] = keep
	default:
		c.byKind[key] = append(c.byKind[key], keep)
		c.resources[keep] = gr
	}
}

// addSample keeps u in the sample with the reservoir's odds (Algorithm
// R); c.mu is held.
func (c *collector) addSample(gr string, u *unstructured.Unstructured) {
	c.seen++
	i := len(c.sample)
	if i >= sampleSize {
		if i = rand.IntN(c.seen); i >= sampleSize {
			return
		}
	}
	resource, group, _ := strings.Cut(gr, ".")
	sm := sampled{gvr: schema.GroupVersionResource{Group: group, Version: u.GroupVersionKind().Version, Resource: resource}, u: u.DeepCopy()}
	if i == len(c.sample) {
		c.sample = append(c.sample, sm)
	} else {
		c.sample[i] = sm
	}
}

func isPullSecret(u *unstructured.Unstructured) bool {
	t, _, _ := unstructured.NestedString(u.Object, "type")
	return t == string(corev1.SecretTypeDockerConfigJson) || t == string(corev1.SecretTypeDockercfg)
}

// workload is an object with a pod spec: its pod template's metadata and
// spec, and its replicas.
type workload struct {
	resource, namespace, name, kind string
	meta                            metav1.ObjectMeta
	spec                            corev1.PodSpec
	// replicas is spec.replicas (1 when unset; -1 for a DaemonSet).
	replicas int64
}

func (w workload) objectName() string { return objectName(w.resource, w.namespace, w.name) }

func newWorkload(gr string, u *unstructured.Unstructured, path []string) *workload {
	gvk := u.GroupVersionKind()
	w := &workload{resource: gr, namespace: u.GetNamespace(), name: u.GetName(), kind: gvk.Kind, replicas: 1}
	if m, ok, _ := unstructured.NestedMap(u.Object, path...); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &w.spec)
	}
	metaPath := append(append([]string(nil), path[:len(path)-1]...), "metadata")
	if m, ok, _ := unstructured.NestedMap(u.Object, metaPath...); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &w.meta)
	}
	if w.meta.Namespace == "" {
		w.meta.Namespace = w.namespace
	}
	if r, ok, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); ok {
		w.replicas = r
	}
	if gvk.Kind == "DaemonSet" {
		w.replicas = -1
	}
	return w
}

// droppable are the kinds the checks judge as the move writes them; the
// others (StorageClasses, CRDs, APIServices, webhook configurations) are
// also the source's definitions the checks compare with the target's.
var droppable = map[string]bool{
	"/PersistentVolumeClaim": true, "/Service": true, "/ServiceAccount": true, "/ResourceQuota": true, "/LimitRange": true,
	"networking.k8s.io/Ingress": true, "policy/PodDisruptionBudget": true,
}

// drop forgets the objects the move does not write (kept: by objectName):
// those the target has already, kept as they are. The checks judge only
// what the move writes.
func (c *collector) drop(kept map[string]bool) {
	if len(kept) == 0 {
		return
	}
	for key, l := range c.byKind {
		if !droppable[key] {
			continue
		}
		out := l[:0]
		for _, u := range l {
			if kept[objectName(c.resources[u], u.GetNamespace(), u.GetName())] {
				c.byResource[c.resources[u]][u.GetNamespace()]--
				continue
			}
			out = append(out, u)
		}
		c.byKind[key] = out
	}
	ws := c.workloads[:0]
	for _, w := range c.workloads {
		if kept[w.objectName()] {
			c.byResource[w.resource][w.namespace]--
			continue
		}
		ws = append(ws, w)
	}
	c.workloads = ws
}

// objects returns the planned objects of kind "group/Kind", converted.
func objectsOf[T any](c *collector, key string) []T {
	var out []T
	for _, u := range c.byKind[key] {
		var v T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// target is what the checks read from the target cluster.
type target struct {
	cluster         *kube.Cluster
	nodes           []corev1.Node
	namespaces      map[string]corev1.Namespace
	storageClasses  map[string]storagev1.StorageClass
	quotas          []corev1.ResourceQuota
	limitRanges     []corev1.LimitRange
	services        []corev1.Service
	ingressClasses  map[string]networkingv1.IngressClass
	validating      []admissionregistrationv1.ValidatingWebhookConfiguration
	mutating        []admissionregistrationv1.MutatingWebhookConfiguration
	apiServices     map[string]*unstructured.Unstructured
	crds            map[string]*unstructured.Unstructured
	endpointsReady  map[string]bool // "namespace/service" with a ready endpoint
	serviceAccounts map[string]corev1.ServiceAccount
	// csiDrivers are the CSI drivers installed in the target.
	csiDrivers map[string]bool
	// unread are the lists the target refused (forbidden, or not served),
	// by name, with why: the checks did not see those objects.
	unread map[string]string
}

// readTarget lists what the checks need from the target. A list the
// target refuses (forbidden, or a resource it does not serve) leaves that
// part empty, and the report says so (target.unread, in Skipped).
func readTarget(ctx context.Context, c *kube.Cluster) (*target, error) {
	t := &target{cluster: c, namespaces: map[string]corev1.Namespace{}, storageClasses: map[string]storagev1.StorageClass{},
		ingressClasses: map[string]networkingv1.IngressClass{}, apiServices: map[string]*unstructured.Unstructured{},
		crds: map[string]*unstructured.Unstructured{}, endpointsReady: map[string]bool{}, serviceAccounts: map[string]corev1.ServiceAccount{},
		csiDrivers: map[string]bool{}, unread: map[string]string{}}
	for _, s := range append(t.coreLists(ctx), t.apiLists(ctx)...) {
		err := s.do()
		switch {
		case apierrors.IsForbidden(err), apierrors.IsNotFound(err):
			t.unread[s.what] = err.Error()
		case err != nil:
			return nil, fmt.Errorf("preflight: reading %s of target %s: %w", s.what, c.Name, err)
		}
	}
	return t, nil
}

// targetList is one list of the target, into t.
type targetList struct {
	what string
	do   func() error
}

// coreLists are the lists of nodes, namespaces, storage, quotas,
// Services and ServiceAccounts.
func (t *target) coreLists(ctx context.Context) []targetList {
	api := t.cluster.Typed
	lo := metav1.ListOptions{}
	return []targetList{
		{"nodes", func() error {
			l, err := api.CoreV1().Nodes().List(ctx, lo)
			t.nodes = items(l, err, func() []corev1.Node { return l.Items })
			return err
		}},
		{"namespaces", func() error {
			l, err := api.CoreV1().Namespaces().List(ctx, lo)
			for _, n := range items(l, err, func() []corev1.Namespace { return l.Items }) {
				t.namespaces[n.Name] = n
			}
			return err
		}},
		{"storageclasses", func() error {
			l, err := api.StorageV1().StorageClasses().List(ctx, lo)
			for _, s := range items(l, err, func() []storagev1.StorageClass { return l.Items }) {
				t.storageClasses[s.Name] = s
			}
			return err
		}},
		{"csidrivers", func() error {
			l, err := api.StorageV1().CSIDrivers().List(ctx, lo)
			for _, d := range items(l, err, func() []storagev1.CSIDriver { return l.Items }) {
				t.csiDrivers[d.Name] = true
			}
			return err
		}},
		{"resourcequotas", func() error {
			l, err := api.CoreV1().ResourceQuotas("").List(ctx, lo)
			t.quotas = items(l, err, func() []corev1.ResourceQuota { return l.Items })
			return err
		}},
		{"limitranges", func() error {
			l, err := api.CoreV1().LimitRanges("").List(ctx, lo)
			t.limitRanges = items(l, err, func() []corev1.LimitRange { return l.Items })
			return err
		}},
		{"services", func() error {
			l, err := api.CoreV1().Services("").List(ctx, lo)
			t.services = items(l, err, func() []corev1.Service { return l.Items })
			return err
		}},
		{"serviceaccounts", func() error {
			l, err := api.CoreV1().ServiceAccounts("").List(ctx, lo)
			for _, s := range items(l, err, func() []corev1.ServiceAccount { return l.Items }) {
				t.serviceAccounts[s.Namespace+"/"+s.Name] = s
			}
			return err
		}},
	}
}

// apiLists are the lists of ingress classes, admission webhooks,
// EndpointSlices, APIServices and CRDs.
func (t *target) apiLists(ctx context.Context) []targetList {
	api, c := t.cluster.Typed, t.cluster
	lo := metav1.ListOptions{}
	return []targetList{
		{"ingressclasses", func() error {
			l, err := api.NetworkingV1().IngressClasses().List(ctx, lo)
			for _, s := range items(l, err, func() []networkingv1.IngressClass { return l.Items }) {
				t.ingressClasses[s.Name] = s
			}
			return err
		}},
		{"validatingwebhookconfigurations", func() error {
			l, err := api.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, lo)
			t.validating = items(l, err, func() []admissionregistrationv1.ValidatingWebhookConfiguration { return l.Items })
			return err
		}},
		{"mutatingwebhookconfigurations", func() error {
			l, err := api.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, lo)
			t.mutating = items(l, err, func() []admissionregistrationv1.MutatingWebhookConfiguration { return l.Items })
			return err
		}},
		{"endpointslices", func() error {
			l, err := api.DiscoveryV1().EndpointSlices("").List(ctx, lo)
			if err != nil {
				return err
			}
			for _, s := range l.Items {
				for _, ep := range s.Endpoints {
					if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
						t.endpointsReady[s.Namespace+"/"+s.Labels["kubernetes.io/service-name"]] = true
					}
				}
			}
			return nil
		}},
		{"apiservices", func() error {
			return listInto(ctx, c, schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}, t.apiServices)
		}},
		{"customresourcedefinitions", func() error {
			return listInto(ctx, c, schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, t.crds)
		}},
	}
}

func items[L any, T any](l L, err error, get func() []T) []T {
	if err != nil {
		return nil
	}
	return get()
}

func listInto(ctx context.Context, c *kube.Cluster, gvr schema.GroupVersionResource, into map[string]*unstructured.Unstructured) error {
	l, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range l.Items {
		into[l.Items[i].GetName()] = &l.Items[i]
	}
	return nil
}

// env is one check's run: the options, the planned objects, the target
// and the dry run's results; the checks add their risks to p.
type env struct {
	o       *Options
	c       *collector
	t       *target
	results *report.Results
	p       *report.Preflight
	// unbound are the claims not Bound in the source (live sources only),
	// by their target "namespace/name".
	unbound map[string]bool
	// copied are the bytes of the images the move copies (checkImages).
	copied *imageBytes
	// uses are the image uses checkImages resolved.
	uses []*imageUse
}

// check is one pre-flight check, and the target's lists it reads: a
// check whose list the target refused does not run (an empty list would
// make it find what is not there, or miss what is), and the report says
// so.
type check struct {
	name  string
	run   func(ctx context.Context, e *env)
	needs []string
}

// checks are run in this order; the report ranks what they find.
var checks = []check{
	{"dry-run", checkDryRun, nil},
	{"storage-class", checkStorageClasses, []string{"storageclasses", "csidrivers"}},
	{"quota", checkQuotas, []string{"resourcequotas", "limitranges", "storageclasses"}},
	{"api", checkAPIs, []string{"customresourcedefinitions"}},
	{"webhook", checkWebhooks, []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations", "endpointslices", "services", "namespaces"}},
	{"apiservice", checkAPIServices, []string{"apiservices", "services"}},
	{"pod-security", checkPodSecurity, []string{"namespaces"}},
	{"scheduling", checkScheduling, []string{"nodes"}},
	{"service", checkServices, []string{"services", "nodes"}},
	{"ingress", checkIngresses, []string{"ingressclasses"}},
	{"image", checkImages, []string{"serviceaccounts", "nodes"}},
	{"image-policy", checkImagePolicies, nil},
}

func (e *env) run(ctx context.Context) {
	for _, ch := range checks {
		var unread []string
		for _, n := range ch.needs {
			if why, ok := e.t.unread[n]; ok {
				unread = append(unread, n+" ("+why+")")
			}
		}
		if len(unread) > 0 {
			e.skip("check %s: the target's %s could not be read", ch.name, strings.Join(unread, ", "))
			continue
		}
		e.p.Checks = append(e.p.Checks, ch.name)
		ch.run(ctx, e)
	}
}

// add records a risk.
func (e *env) add(sev report.Severity, check string, objects []string, what, fix string) {
	e.p.Add(report.Risk{Severity: sev, Check: check, Objects: objects, What: what, Fix: fix})
}

// skip says a check (or part of one) could not run, and why.
func (e *env) skip(format string, args ...any) {
	e.p.Skipped = append(e.p.Skipped, fmt.Sprintf(format, args...))
}

// namespaceLabels are the labels namespace ns will have in the target:
// the target's own when it has the namespace, else the restored one's.
func (e *env) namespaceLabels(ns string) (map[string]string, bool) {
	if n, ok := e.t.namespaces[ns]; ok {
		return n.Labels, true
	}
	for _, u := range e.c.byKind["/Namespace"] {
		if u.GetName() == ns {
			return u.GetLabels(), true
		}
	}
	return nil, false
}
