package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

// start starts the registry (with ferry's image), the S3 server and the
// two clusters; stop stops what started.
func (b *bench) start(ctx context.Context, work string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if out, err := exec.Command("make", "-C", b.root, "build").CombinedOutput(); err != nil {
		return stop, fmt.Errorf("make build: %v\n%s", err, out)
	}
	benchutil.Logf(prog, "starting the registry and pushing ferry's image (make image)")
	reg, err := testenv.StartRegistry(ctx, nil, testenv.RegistryOptions{})
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { reg.Stop() })
	cmd := exec.Command("make", "image", "IMAGE="+reg.Host+"/ferry:bench", "IMAGE_INSECURE=1", "BIN="+filepath.Join(work, "image-bin"))
	cmd.Dir = b.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return stop, fmt.Errorf("make image: %v\n%s", err, out)
	}
	b.image, b.busybox, b.etcd = reg.NodeHost+"/ferry:bench", reg.NodeHost+"/"+testenv.BusyboxImage, reg.NodeHost+"/"+testenv.EtcdImage
	s3, err := testenv.StartS3(ctx, nil)
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { s3.Stop() })
	for _, name := range []string{bucket, stwBucket} {
		if err := s3.CreateBucket(ctx, name); err != nil {
			return stop, err
		}
	}
	b.env = []string{store.EnvAWSAccessKeyID + "=" + s3.AccessKey, store.EnvAWSSecretAccessKey + "=" + s3.SecretKey}
	loc := func(bucket string) string {
		return fmt.Sprintf("s3://%s?endpoint=%s&use_path_style=true&region=%s", bucket, s3.NodeEndpoint, testenv.S3Region)
	}
	b.location, b.stwLocation = loc(bucket), loc(stwBucket)
	benchutil.Logf(prog, "starting two clusters with a node each")
	cs, err := testenv.StartNodeClusters(ctx, nil, reg, "src", "dst")
	if err != nil {
		return stop, err
	}
	for _, c := range cs {
		stops = append(stops, func() { _ = c.Stop() })
	}
	b.src, b.dst = cs[0], cs[1]
	return stop, testenv.WriteKubeconfig(b.kubeconfig, cs...)
}

// fixture makes the source's namespace, claim (with the data set) and
// writer, and pulls busybox on the target's node, so that neither
// migration's start pays for it.
func (b *bench) fixture(ctx context.Context) (int, error) {
	k := kubernetes.NewForConfigOrDie(b.src.Config)
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	_, err := k.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}},
	}}, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	dir, err := hostDir(ctx, k, "data")
	if err != nil {
		return 0, err
	}
	benchutil.Logf(prog, "writing the %.0f MiB data set into %s", float64(b.size)/(1<<20), dir)
	n, files, err := benchutil.MakeDataSet(dir, b.size)
	if err != nil {
		return 0, err
	}
	b.size = n
	one := int32(1)
	sel := map[string]string{"app": "writer"}
	_, err = k.AppsV1().Deployments(namespace).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "writer"}, Spec: appsv1.DeploymentSpec{
		Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}, Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64),
			Containers: b.containers(),
			Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}}}, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	if err := ready(ctx, k, namespace, 1); err != nil {
		return 0, err
	}
	for _, image := range []string{b.busybox, b.etcd} {
		if err := warmUp(ctx, kubernetes.NewForConfigOrDie(b.dst.Config), image); err != nil {
			return 0, err
		}
	}
	return files, nil
}

// containers are the writer pod's: the segment writer (main), and a real
// database beside it, etcd with a writer putting a key every 50 ms
// (testenv.EtcdDBScript, EtcdWriterScript), all on the claim. The pod
// has no termination grace: etcd is stopped by SIGKILL, as in a crash,
// and must lose no acknowledged key.
func (b *bench) containers() []corev1.Container {
	mount := []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	probe := func(cmd ...string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}, PeriodSeconds: 1}
	}
	return []corev1.Container{
		{Name: "main", Image: b.busybox, Command: []string{"sh", "-c", writer}, VolumeMounts: mount, ReadinessProbe: probe("test", "-f", "/tmp/ready")},
		{Name: "etcd", Image: b.etcd, Command: []string{"sh", "-c", testenv.EtcdDBScript}, VolumeMounts: mount,
			ReadinessProbe: probe("wget", "-q", "-O", "/dev/null", "http://127.0.0.1:2379/health")},
		{Name: "keys", Image: b.busybox, Command: []string{"sh", "-c", testenv.EtcdWriterScript}, VolumeMounts: mount, ReadinessProbe: probe("test", "-f", "/tmp/ready")},
	}
}

// etcdKeys checks the etcd of namespace ns's writer pod in cluster c: it
// holds every key its writer acknowledged, at least acked of them.
func (b *bench) etcdKeys(ctx context.Context, c *testenv.Cluster, ns string, acked int) (int, error) {
	pods, err := kubernetes.NewForConfigOrDie(c.Config).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=writer"})
	if err != nil || len(pods.Items) != 1 {
		return 0, fmt.Errorf("%s: the writer pod in %s: %v (%d pods)", c.Name, ns, err, len(pods.Items))
	}
	last, held, err := testenv.EtcdKeys(ctx, c.Config, ns, pods.Items[0].Name, "keys")
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s: %w", c.Name, err)
	case last < acked || held != last:
		return held, fmt.Errorf("%s: etcd holds %d of the %d keys its writer acknowledged; %d were acknowledged before the cutover", c.Name, held, last, acked)
	}
	return held, nil
}

// hostDir waits for claim name to be bound and returns its volume's host
// directory.
func hostDir(ctx context.Context, k kubernetes.Interface, name string) (string, error) {
	var dir string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pvc, err := k.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || pvc.Status.Phase != corev1.ClaimBound {
			return false, err
		}
		pv, err := k.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.HostPath == nil {
			return false, errors.New("the claim's volume is not a hostPath volume")
		}
		dir = pv.Spec.HostPath.Path
		return true, nil
	})
	return dir, err
}

// ready waits until namespace ns has n Ready pods (0: none at all).
func ready(ctx context.Context, k kubernetes.Interface, ns string, n int) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := k.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=writer"})
		if err != nil {
			return false, nil
		}
		if n == 0 {
			return len(pods.Items) == 0, nil
		}
		r := 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					r++
				}
			}
		}
		return r == n, nil
	})
}

// warmUp pulls image on the node of k's cluster.
func warmUp(ctx context.Context, k kubernetes.Interface, image string) error {
	pods := k.CoreV1().Pods("default")
	p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "warm-up"}, Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{Name: "main", Image: image, Command: []string{"true"}}}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err = pods.Get(ctx, p.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, nil
	})
	if err != nil {
		return fmt.Errorf("warm-up pod: %w", err)
	}
	return pods.Delete(ctx, p.Name, metav1.DeleteOptions{})
}

// stopTheWorld migrates namespace db with the writer stopped for the
// whole copy, as migration name through location loc into namespace name
// of the target, and returns the downtime: the scale down to the
// migrate's exit (its verification waits until the target's writer
// runs). The source's writer runs again after.
func (b *bench) stopTheWorld(ctx context.Context, loc, name string) (downtime, migrate float64, timings []report.Timing, err error) {
	k := kubernetes.NewForConfigOrDie(b.src.Config)
	start := time.Now()
	scale := func(n int) error {
		_, err := k.AppsV1().Deployments(namespace).Patch(ctx, "writer", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n), metav1.PatchOptions{})
		if err != nil {
			return err
		}
		return ready(ctx, k, namespace, n)
	}
	if err := scale(0); err != nil {
		return 0, 0, nil, err
	}
	reports := filepath.Join(os.TempDir(), "ferry-bench-cutover-"+name)
	mstart := time.Now()
	err = b.ferryRunAt(loc, "", name, stwFlags(name, reports)...)
	took := time.Since(start).Seconds()
	migrate = time.Since(mstart).Seconds()
	if err != nil {
		return 0, 0, nil, err
	}
	// The verification report's timings: each step's actual time.
	var v report.Verification
	if raw, rerr := os.ReadFile(filepath.Join(reports, "report.json")); rerr == nil && json.Unmarshal(raw, &v) == nil {
		timings = v.Timings
	}
	_ = os.RemoveAll(reports)
	// The target's copy stops: it would write beside the cutover measured
	// later.
	_, err = kubernetes.NewForConfigOrDie(b.dst.Config).AppsV1().Deployments(name).Patch(ctx, "writer", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{})
	if err != nil {
		return 0, 0, nil, err
	}
	return took, migrate, timings, scale(1)
}

// stwFlags are the stop-the-world migration's selection and mapping
// flags (and its pre-flight's), into namespace name.
func stwFlags(name, reports string) []string {
	return []string{"--include-namespaces", namespace, "--namespace-mappings", namespace + ":" + name, "--default-volumes-to-fs-backup", "--report-dir", reports}
}
