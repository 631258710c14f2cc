package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/nodeagent"
	"github.com/kubeferry/ferry/pkg/servermode"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// TestInstall applies `ferry install --dry-run -o yaml` to a real API
// server, checks its RBAC has no "*" verbs, then runs the server as the
// installed ServiceAccount (impersonated): the location with the rendered
// credential Secret becomes Available, and a backup and a restore (into a
// mapped namespace) complete, so the least-privilege RBAC is enough. A
// node agent as its own installed ServiceAccount, with the password from
// the installed Secret, backs up and restores a pod's volume data for them.
// `ferry uninstall` then removes the CRDs and the namespace.
func TestInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx := context.Background()
	c, s3, creds := serverSetup(t, "inst")
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "repository-password")
	if err := os.WriteFile(pwFile, []byte("install-test-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := ferry(t, nil, "install", "--dry-run", "-o", "yaml", "--location-url", s3.URL("ferry"), "--credentials-file", creds, "--repository-password-file", pwFile, "--image", "example.com/ferry:test")
	if r.code != 0 {
		t.Fatalf("install: exit %d: %s", r.code, r.stderr)
	}
	manifest := filepath.Join(dir, "install.yaml")
	if err := os.WriteFile(manifest, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	created, err := testenv.Apply(ctx, c.Config, "", manifest)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range created {
		kinds[o.GetKind()]++
	}
	for kind, n := range map[string]int{"CustomResourceDefinition": 6, "Namespace": 1, "ServiceAccount": 2, "ClusterRole": 2, "Role": 2, "Deployment": 1, "DaemonSet": 1, "Secret": 2, "BackupStorageLocation": 1} {
		if kinds[kind] != n {
			t.Errorf("%d %s applied, want %d", kinds[kind], kind, n)
		}
	}
	checkRBAC(t, r.stdout)

	cl, err := crclient.New(c.Config, crclient.Options{Scheme: servermode.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The password as the kubelet would give it: from the installed
	// Secret, through the env var the Deployment and DaemonSet name.
	ds := &appsv1.DaemonSet{}
	if err := cl.Get(ctx, crclient.ObjectKey{Namespace: "ferry", Name: "ferry-node-agent"}, ds); err != nil {
		t.Fatal(err)
	}
	password := installedPassword(t, cl, ds.Spec.Template.Spec.Containers[0])
	if args := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "node-agent --server") {
		t.Errorf("node agent args %q", args)
	}
	nsObj := &corev1.Namespace{}
	if err := cl.Get(ctx, crclient.ObjectKey{Name: "ferry"}, nsObj); err != nil || nsObj.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace labels %v (%v): the node agent's hostPath needs the privileged Pod Security level", nsObj.Labels, err)
	}
	dep := &appsv1.Deployment{}
	if err := cl.Get(ctx, crclient.ObjectKey{Namespace: "ferry", Name: "ferry-server"}, dep); err != nil {
		t.Fatal(err)
	}
	if p := installedPassword(t, cl, dep.Spec.Template.Spec.Containers[0]); p != password || p != "install-test-password" {
		t.Errorf("server password %q, node agent's %q", p, password)
	}

	// The server and a node agent, each as its ServiceAccount.
	as := func(sa string) *rest.Config {
		cfg := rest.CopyConfig(c.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:ferry:" + sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ferry", "system:authenticated"}}
		return cfg
	}
	mctx, cancel := context.WithCancel(ctx)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := servermode.NewManager(mctx, servermode.Options{Namespace: "ferry", Config: as("ferry-server"), MetricsAddr: "0", ProbeAddr: "0", LeaderElect: true,
		SyncPeriod: time.Second, ValidationPeriod: time.Second, Log: quiet, RepositoryPassword: password, PodVolumeTimeout: time.Minute, SeveralPerProcess: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	podsDir := t.TempDir()
	agent, err := nodeagent.NewManager(nodeagent.Options{Namespace: "ferry", Node: "node-1", HostPodsDir: podsDir, Config: as("ferry-node-agent"),
		Password: password, Wait: 30 * time.Second, MetricsAddr: "0", ProbeAddr: "0", Log: quiet, SeveralPerProcess: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- mgr.Start(mctx) }()
	go func() { done <- agent.Start(mctx) }()
	defer func() {
		cancel()
		for i := 0; i < 2; i++ {
			if err := <-done; err != nil {
				t.Errorf("server or node agent: %v", err)
			}
		}
	}()
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"i": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	// A pod on node-1 with an emptyDir whose data is backed up.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", Annotations: map[string]string{v1alpha1.AnnotationBackupVolumes: "cache"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "busybox:1.37"}},
			Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(podsDir, string(pod.UID), "volumes", "kubernetes.io~empty-dir", "cache")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cacheDir, "state"), []byte("through the installed RBAC"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "deleter"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}}}}); err != nil {
		t.Fatal(err)
	}
	poll(t, 20*time.Second, "location Available", func() error {
		bsl := &v1alpha1.BackupStorageLocation{}
		if err := cl.Get(ctx, crclient.ObjectKey{Namespace: "ferry", Name: "default"}, bsl); err != nil {
			return err
		}
		if bsl.Status.Phase != v1alpha1.LocationAvailable {
			return fmt.Errorf("phase %q: %s", bsl.Status.Phase, bsl.Status.Message)
		}
		return nil
	})
	b := v1alpha1.NewBackup("app")
	b.Namespace = "ferry"
	b.Spec.IncludedNamespaces = []string{"app"}
	if err := cl.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	poll(t, 60*time.Second, "backup", func() error {
		if err := cl.Get(ctx, crclient.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		if b.Status.Phase != v1alpha1.PhaseCompleted {
			return fmt.Errorf("phase %q: %s (errors %d)", b.Status.Phase, b.Status.FailureReason, b.Status.Errors)
		}
		return nil
	})
	if pv := b.Status.PodVolumes; pv == nil || pv.Completed != 1 {
		t.Fatalf("backup pod volumes %+v", pv)
	}
	cs := kubernetes.NewForConfigOrDie(c.Config)
	kctx, stopNode := context.WithCancel(ctx)
	defer stopNode()
	go testenv.FakeScheduler(kctx, cs, "app-copy", "node-1")
	go testenv.FakeKubelet(kctx, cs, "app-copy", "node-1", podsDir)
	rs := v1alpha1.NewRestore("app-copy")
	rs.Namespace = "ferry"
	rs.Spec.BackupName = "app"
	rs.Spec.NamespaceMapping = map[string]string{"app": "app-copy"}
	if err := cl.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	poll(t, 60*time.Second, "restore", func() error {
		if err := cl.Get(ctx, crclient.ObjectKeyFromObject(rs), rs); err != nil {
			return err
		}
		if rs.Status.Phase != v1alpha1.PhaseCompleted {
			return fmt.Errorf("phase %q: %s (counts %+v)", rs.Status.Phase, rs.Status.FailureReason, rs.Status.Counts)
		}
		return nil
	})
	role := &rbacv1.Role{}
	if err := cl.Get(ctx, crclient.ObjectKey{Namespace: "app-copy", Name: "deleter"}, role); err != nil {
		t.Errorf("restored Role (needs escalate): %v", err)
	}
	if err := cl.Get(ctx, crclient.ObjectKey{Namespace: "app-copy", Name: "cm-3"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("restored ConfigMap: %v", err)
	}
	copyPod := &corev1.Pod{}
	if err := cl.Get(ctx, crclient.ObjectKey{Namespace: "app-copy", Name: "web"}, copyPod); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(podsDir, string(copyPod.UID), "volumes", "kubernetes.io~empty-dir", "cache", "state"))
	if err != nil || string(got) != "through the installed RBAC" || rs.Status.PodVolumes == nil || rs.Status.PodVolumes.Completed != 1 {
		t.Errorf("restored volume data %q (%v), pod volumes %+v", got, err, rs.Status.PodVolumes)
	}
	stopNode()
	cancel()
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Errorf("server or node agent: %v", err)
		}
	}
	done <- nil
	done <- nil

	u := ferry(t, nil, "uninstall", "--kubeconfig", c.KubeconfigPath)
	if u.code != 0 {
		t.Fatalf("uninstall: exit %d: %s", u.code, u.stderr)
	}
	if !strings.Contains(u.stdout, "CustomResourceDefinition backups.ferry.dev deleted") || !strings.Contains(u.stdout, "Namespace ferry deleted") {
		t.Errorf("uninstall output:\n%s", u.stdout)
	}
}

// installedPassword is the value container c gets in
// $FERRY_REPOSITORY_PASSWORD from its Secret.
func installedPassword(t *testing.T, cl crclient.Client, c corev1.Container) string {
	t.Helper()
	for _, e := range c.Env {
		if e.Name != volumes.EnvPassword || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		s := &corev1.Secret{}
		if err := cl.Get(context.Background(), crclient.ObjectKey{Namespace: "ferry", Name: ref.Name}, s); err != nil {
			t.Fatal(err)
		}
		return string(s.Data[ref.Key])
	}
	t.Fatalf("container %s has no %s from a Secret: %+v", c.Name, volumes.EnvPassword, c.Env)
	return ""
}

// checkRBAC fails on any rule with "*" verbs; "*" resources are allowed
// only in the documented ClusterRoles ferry-server-read and -restore.
func checkRBAC(t *testing.T, manifest string) {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
		for _, x := range rules {
			rule := x.(map[string]any)
			verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
			resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
			for _, v := range verbs {
				if v == "*" {
					t.Errorf("%s %s: rule %v has * verbs", u.GetKind(), u.GetName(), rule)
				}
			}
			for _, r := range resources {
				if r == "*" && u.GetName() != "ferry-server-read" && u.GetName() != "ferry-server-restore" {
					t.Errorf("%s %s: undocumented * resources in %v", u.GetKind(), u.GetName(), rule)
				}
			}
		}
	}
}

func poll(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v after %s", what, err, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
