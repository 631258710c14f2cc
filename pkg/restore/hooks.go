package restore

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/hooks"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/transform"
)

// defaultHookWait bounds the wait for a hook's container when its
// annotations set no wait-timeout (Velero waits without bound) and the
// restore sets no volume timeout (PodVolumeOptions.Wait).
const defaultHookWait = 10 * time.Minute

// runRestoreHooks runs the post-restore exec hooks (Velero's
// post.hook.restore.velero.io/ annotations, or ferry's) of the pods this
// restore brought: pods it created, and pods of workloads it created (by
// their owners, up to two levels: Deployment, ReplicaSet, Pod). Each waits
// until its container runs (is Ready, with wait-for-ready). A failed hook
// is an error of the restore when its on-error is Fail, a warning
// otherwise; each names pod, container and command.
func runRestoreHooks(ctx context.Context, cluster *kube.Cluster, p *Plan, o *Options, results *report.Results) {
	todo := findRestoreHooks(ctx, cluster, p, o, results)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, ph := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			hctx := ctx
			if ph.hook.WaitTimeout == 0 {
				wait := defaultHookWait
				if o.PodVolumes != nil && o.PodVolumes.Wait > 0 {
					wait = o.PodVolumes.Wait
				}
				var cancel context.CancelFunc
				hctx, cancel = context.WithTimeout(ctx, wait)
				defer cancel()
			}
			res := hooks.RunAfterReady(hctx, cluster.Config, cluster.Typed, ph.pod.Namespace, ph.pod.Name, ph.hook)
			switch {
			case res.Err == nil:
				o.Log.Info("post-restore hook ran", "pod", res.Pod, "container", res.Container, "took", res.Duration)
			case ph.hook.OnError == hooks.OnErrorFail:
				results.Errorf("%v", res.Err)
			default:
				results.Warnf("%v (on-error: Continue)", res.Err)
			}
		}()
	}
	wg.Wait()
}

// ownership says whether an object (by its labels and owners) came from
// this restore: it carries the restore's label, or an owner of it does.
type ownership struct {
	client kubernetes.Interface
	label  string
	mu     sync.Mutex
	cache  map[string]bool // kind/namespace/name -> restored
}

func (w *ownership) restored(ctx context.Context, ns string, labels map[string]string, owners []metav1.OwnerReference, depth int) bool {
	if labels[v1alpha1.LabelRestore] == w.label {
		return true
	}
	if depth >= 2 {
		return false
	}
	for _, ref := range owners {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		key := ref.Kind + "/" + ns + "/" + ref.Name
		w.mu.Lock()
		v, ok := w.cache[key]
		w.mu.Unlock()
		if !ok {
			v = w.lookup(ctx, ns, ref, depth)
			w.mu.Lock()
			w.cache[key] = v
			w.mu.Unlock()
		}
		if v {
			return true
		}
	}
	return false
}

// lookup reads a controller of a pod (or of its ReplicaSet or Job).
func (w *ownership) lookup(ctx context.Context, ns string, ref metav1.OwnerReference, depth int) bool {
	var meta metav1.Object
	var err error
	switch ref.Kind {
	case "ReplicaSet":
		meta, err = w.client.AppsV1().ReplicaSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	case "StatefulSet":
		meta, err = w.client.AppsV1().StatefulSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	case "DaemonSet":
		meta, err = w.client.AppsV1().DaemonSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	case "Deployment":
		meta, err = w.client.AppsV1().Deployments(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	case "Job":
		meta, err = w.client.BatchV1().Jobs(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	case "CronJob":
		meta, err = w.client.BatchV1().CronJobs(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	default:
		return false
	}
	if err != nil {
		return false
	}
	return w.restored(ctx, ns, meta.GetLabels(), meta.GetOwnerReferences(), depth+1)
}

// podHook is a pod of this restore and its post-restore hook.
type podHook struct {
	pod  corev1.Pod
	hook *hooks.ExecHook
}

// findRestoreHooks returns the pods of the restored namespaces that this
// restore brought (ownership) and that have a post-restore hook. The pods
// are read with one paginated cluster-wide LIST (restorePods); an invalid
// hook of a pod is an error of the restore.
func findRestoreHooks(ctx context.Context, cluster *kube.Cluster, p *Plan, o *Options, results *report.Results) []podHook {
	nss := map[string]bool{}
	for _, it := range p.Items {
		if it.Skip == "" && it.Namespace != "" {
			nss[o.mapNamespace(it.Namespace)] = true
		}
	}
	var todo []podHook
	own := &ownership{client: cluster.Typed, label: transform.LabelValue(o.Name), cache: map[string]bool{}}
	restorePods(ctx, cluster.Typed, nss, results, func(pod *corev1.Pod) {
		h, err := hooks.RestoreHook(pod)
		if err != nil {
			results.Errorf("%v", err)
			return
		}
		if h != nil && own.restored(ctx, pod.Namespace, pod.Labels, pod.OwnerReferences, 0) {
			todo = append(todo, podHook{pod: *pod, hook: h})
		}
	})
	return todo
}

// hookPageSize is the page size of restorePods' LIST.
const hookPageSize = 500

// restorePods calls fn for each pod in namespaces nss. More than one
// namespace is read with one paginated cluster-wide LIST: one LIST per
// namespace took 18 s of a restore into 200 namespaces while the API
// server was busy with the controllers' work on what had been restored
// (docs/benchmarks.md#load-results). A user who may not list pods
// cluster-wide gets one LIST per namespace instead.
func restorePods(ctx context.Context, client kubernetes.Interface, nss map[string]bool, results *report.Results, fn func(*corev1.Pod)) {
	if len(nss) > 1 {
		pg := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		})
		pg.PageSize = hookPageSize
		var seen []*corev1.Pod
		err := pg.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
			if pod, ok := obj.(*corev1.Pod); ok && nss[pod.Namespace] {
				seen = append(seen, pod)
			}
			return nil
		})
		if err == nil {
			for _, pod := range seen {
				fn(pod)
			}
			return
		}
		if !apierrors.IsForbidden(err) {
			results.Warnf("post-restore hooks not run: listing pods: %v", err)
			return
		}
	}
	names := make([]string, 0, len(nss))
	for ns := range nss {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			results.Warnf("post-restore hooks in namespace %s not run: listing pods: %v", ns, err)
			continue
		}
		for i := range pods.Items {
			fn(&pods.Items[i])
		}
	}
}
