package running

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
)

func one() *int32 { n := int32(1); return &n }

func node() *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}} }

func deploy(name string, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Generation: 1},
		Spec: appsv1.DeploymentSpec{Replicas: one(), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "reg.example/" + name + ":1"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, AvailableReplicas: available, UpdatedReplicas: available}}
}

func podOf(name, app string, st corev1.PodStatus) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Labels: map[string]string{"app": app}}, Status: st}
}

func check(t *testing.T, objs []Object, in ...runtime.Object) *report.Running {
	t.Helper()
	cl := &kube.Cluster{Typed: fake.NewClientset(in...)}
	return Check(context.Background(), cl, objs, Options{Timeout: 50 * time.Millisecond, Poll: 10 * time.Millisecond})
}

func row(t *testing.T, r *report.Running, name string) report.Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no row %s in %+v", name, r.Checks)
	return report.Check{}
}

// Each fault of a workload is reported with the cluster's own reason.
func TestCheckReasons(t *testing.T) {
	pull := podOf("web-1", "web", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "reg.example/web:1",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}})
	sched := podOf("pinned-1", "pinned", corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}}})
	secret := podOf("cfg-1", "cfg", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "reg.example/cfg:1",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "db-password" not found`}}}}})
	mount := podOf("mnt-1", "mnt", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}})
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "mnt-1.1"}, Type: corev1.EventTypeWarning, Reason: "FailedMount",
		Message: `MountVolume.SetUp failed for volume "tls" : secret "tls" not found`, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "app", Name: "mnt-1"}, LastTimestamp: metav1.Now()}
	ok := deploy("ok", 1)
	objs := []Object{{"deployments.apps", "app", "web"}, {"deployments.apps", "app", "pinned"}, {"deployments.apps", "app", "cfg"},
		{"deployments.apps", "app", "mnt"}, {"deployments.apps", "app", "ok"}, {"deployments.apps", "app", "gone"}}
	r := check(t, objs, node(), deploy("web", 0), deploy("pinned", 0), deploy("cfg", 0), deploy("mnt", 0), ok, pull, sched, secret, mount, ev)
	for name, want := range map[string][2]string{
		"web":    {"ImagePullBackOff", "image reg.example/web:1"},
		"pinned": {"FailedScheduling", "didn't match Pod's node affinity/selector"},
		"cfg":    {"CreateContainerConfigError", `secret "db-password" not found`},
		"mnt":    {"FailedMount", `secret "tls" not found`},
		"gone":   {"NotFound", "not in the target"},
	} {
		c := row(t, r, name)
		if c.OK || c.Reason != want[0] || !strings.Contains(c.Message, want[1]) {
			t.Errorf("%s: %+v, want not OK with reason %s and %q", name, c, want[0], want[1])
		}
	}
	if c := row(t, r, "ok"); !c.OK || c.Outcome != "running" {
		t.Errorf("ok: %+v, want running", c)
	}
	if r.Counts.Workloads != 6 || r.Counts.WorkloadsRunning != 1 || r.Counts.Failed != 5 {
		t.Errorf("counts %+v", r.Counts)
	}
	if r.Checks[0].OK || !r.Checks[len(r.Checks)-1].OK {
		t.Errorf("failures do not come first: %+v", r.Checks)
	}
}

func TestCheckJobsServicesClaims(t *testing.T) {
	done := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "load"},
		Status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	failed := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "bad"},
		Status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}}
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}}}
	}
	ready := true
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db-x", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}}
	external := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example"}}
	bound := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "data"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pending := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "lost"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	// Its pod succeeded; the Job controller has not written Complete yet.
	finishing := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "finishing"}, Status: batchv1.JobStatus{Succeeded: 1}}
	// Its only pod succeeded; the Job controller still counts it active,
	// no longer ready (seen in CI: a restored Job between the two).
	zero := int32(0)
	exiting := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "exiting"},
		Spec:   batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "exiting"}}},
		Status: batchv1.JobStatus{Active: 1, Ready: &zero}}
	exitingPod := podOf("exiting-1", "exiting", corev1.PodStatus{Phase: corev1.PodSucceeded})
	// Its pod runs and is not ready yet: not running.
	starting := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "starting"},
		Spec:   batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "starting"}}},
		Status: batchv1.JobStatus{Active: 1, Ready: &zero}}
	startingPod := podOf("starting-1", "starting", corev1.PodStatus{Phase: corev1.PodRunning})
	// Its only pod succeeded and the controller no longer counts it
	// active, while its finalizer is still on: neither active nor
	// succeeded (CI: TestServerWorkloadVolumes' report-manual).
	uncounted := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "uncounted"},
		Spec:   batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "uncounted"}}},
		Status: batchv1.JobStatus{Ready: &zero, UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"u-1"}}}}
	uncountedPod := podOf("uncounted-1", "uncounted", corev1.PodStatus{Phase: corev1.PodSucceeded})
	// One of three completions succeeded and is counted; no pod runs
	// (backoff, quota): not running.
	three := int32(3)
	stalled := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "stalled"},
		Spec:   batchv1.JobSpec{Completions: &three, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "stalled"}}},
		Status: batchv1.JobStatus{Succeeded: 1, Ready: &zero}}
	stalledPod := podOf("stalled-1", "stalled", corev1.PodStatus{Phase: corev1.PodSucceeded})
	// The same, with the pod gone from the API already.
	gone := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "gone"},
		Spec:   batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gone"}}},
		Status: batchv1.JobStatus{Ready: &zero, UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"g-1"}}}}
	objs := []Object{{"jobs.batch", "app", "finishing"}, {"jobs.batch", "app", "exiting"}, {"jobs.batch", "app", "starting"}, {"jobs.batch", "app", "uncounted"}, {"jobs.batch", "app", "gone"}, {"jobs.batch", "app", "stalled"}, {"jobs.batch", "app", "load"}, {"jobs.batch", "app", "bad"}, {"services", "app", "db"}, {"services", "app", "web"},
		{"services", "app", "ext"}, {"services", "app", "idle"}, {"persistentvolumeclaims", "app", "data"}, {"persistentvolumeclaims", "app", "lost"}}
	// web's pod runs and is not ready; idle selects no pod at all.
	webPod := podOf("web-1", "web", corev1.PodStatus{Phase: corev1.PodRunning})
	r := check(t, objs, node(), finishing, exiting, exitingPod, starting, startingPod, uncounted, uncountedPod, gone, stalled, stalledPod, done, failed, svc("db"), svc("web"), svc("idle"), slice, external, bound, pending, webPod)
	for name, ok := range map[string]bool{"finishing": true, "exiting": true, "starting": false, "uncounted": true, "gone": true, "stalled": false, "load": true, "bad": false, "db": true, "web": false, "idle": true, "data": true, "lost": false} {
		if c := row(t, r, name); c.OK != ok {
			t.Errorf("%s: %+v, want OK %v", name, c, ok)
		}
	}
	for _, c := range r.Checks {
		if c.Name == "ext" {
			t.Errorf("a Service without selector is not checked, got %+v", c)
		}
	}
	if c := row(t, r, "bad"); c.Reason != "BackoffLimitExceeded" {
		t.Errorf("bad: reason %q, want the Job's condition", c.Reason)
	}
	if c := row(t, r, "idle"); c.Outcome != "no pods selected" {
		t.Errorf("a Service that selects no pod (scaled to zero): %+v", c)
	}
	if r.Counts.Services != 3 || r.Counts.ServicesServing != 2 || r.Counts.Claims != 2 || r.Counts.ClaimsOK != 1 {
		t.Errorf("counts %+v", r.Counts)
	}
}

// A target without nodes runs nothing: the check is skipped, and says why.
func TestCheckNoNodes(t *testing.T) {
	r := check(t, []Object{{"deployments.apps", "app", "web"}}, deploy("web", 0))
	if r.Skipped != NoNodes || len(r.Checks) != 0 || r.Counts.Failed != 0 {
		t.Errorf("got %+v, want skipped for no nodes", r)
	}
	if !strings.HasPrefix(r.Headline(), "runtime checks skipped") {
		t.Errorf("headline %q", r.Headline())
	}
}

func TestObjects(t *testing.T) {
	items := []report.Result{
		{Resource: "deployments.apps", Namespace: "src", Name: "web", TargetNamespace: "dst", Outcome: report.Match},
		{Resource: "configmaps", Namespace: "src", Name: "cfg", Outcome: report.Match},
		{Resource: "services", Namespace: "src", Name: "db", Outcome: report.Missing},
		{Resource: "persistentvolumeclaims", Namespace: "src", Name: "data", Outcome: report.Differs},
	}
	got := Objects(items)
	want := []Object{{"deployments.apps", "dst", "web"}, {"persistentvolumeclaims", "src", "data"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Objects = %+v, want %+v", got, want)
	}
}

type resolver map[string]string // ref -> digest; missing: not found

// ReferrersOf lists a referrer "sha256:aaa…" of every image but those
// whose reference holds "unsigned".
func (r resolver) ReferrersOf(_ context.Context, ref string) ([]images.Referrer, error) {
	if strings.Contains(ref, "unsigned") {
		return nil, nil
	}
	return []images.Referrer{{Subject: r[ref], Digest: signature}}, nil
}

const signature = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func (r resolver) Describe(_ context.Context, ref string) (*remote.Descriptor, []string, error) {
	d, ok := r[ref]
	if !ok {
		return nil, nil, &transport.Error{StatusCode: http.StatusNotFound, Errors: []transport.Diagnostic{{Code: transport.ManifestUnknownErrorCode}}}
	}
	h, err := v1.NewHash(d)
	if err != nil {
		return nil, nil, err
	}
	return &remote.Descriptor{Descriptor: v1.Descriptor{Digest: h}}, nil, nil
}

// Each image the workloads name is resolved once; ferry's own init
// container is not the application's and is left out.
func TestCheckImages(t *testing.T) {
	const good = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const other = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "cache"},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "ferry-restore-wait", Image: "reg.example/ferry:1"}},
			Containers: []corev1.Container{{Name: "c", Image: "reg.example/cache:1"}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	objs := []Object{{"deployments.apps", "app", "web"}, {"deployments.apps", "app", "ok"}, {"deployments.apps", "app", "unsigned"}, {"pods", "app", "cache"}}
	cl := &kube.Cluster{Typed: fake.NewClientset(node(), deploy("web", 1), deploy("ok", 1), deploy("unsigned", 1), p)}
	r := Check(context.Background(), cl, objs, Options{Timeout: time.Millisecond, Poll: time.Millisecond,
		Images: resolver{"reg.example/ok:1": good, "reg.example/cache:1": other, "reg.example/unsigned:1": good}, Digests: map[string]bool{good: true},
		Referrers: map[string][]images.Referrer{good: {{Subject: good, Digest: signature, Tag: "sha256-1111.sig"}}}})
	if c := row(t, r, "reg.example/web:1"); c.OK || c.Outcome != "missing" || !strings.Contains(c.Message, "used by Deployment app/web") {
		t.Errorf("absent image: %+v", c)
	}
	if c := row(t, r, "reg.example/ok:1"); !c.OK || c.Detail != good || !strings.Contains(c.Message, "1 referrers present: "+signature) {
		t.Errorf("present image: %+v", c)
	}
	// The same image under a name whose registry lists no referrer: the
	// signature that travelled with it is missing.
	if c := row(t, r, "reg.example/unsigned:1"); c.OK || c.Reason != "ReferrersMissing" || !strings.Contains(c.Message, signature+" (tag sha256-1111.sig of "+good+")") {
		t.Errorf("an image whose signature is missing: %+v", c)
	}
	if c := row(t, r, "reg.example/cache:1"); c.OK || c.Reason != "DigestNotRecorded" {
		t.Errorf("an image whose digest the backup did not record: %+v", c)
	}
	for _, c := range r.Checks {
		if c.Name == "reg.example/ferry:1" {
			t.Errorf("ferry's restore-wait image is checked: %+v", c)
		}
	}
	if r.Counts.Images != 4 || r.Counts.ImagesPresent != 1 {
		t.Errorf("counts %+v", r.Counts)
	}
}
