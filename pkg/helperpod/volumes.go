package helperpod

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// DefaultNodePodsDir is the kubelet's pods directory on a node.
const DefaultNodePodsDir = "/var/lib/kubelet/pods"

// Helpers moves volume data through helper pods (pkg/helperpod) that run
// ferry's image in the cluster, with nothing of ferry installed there: a
// claim is mounted into its helper pod; any other volume is read or
// written in the kubelet pods directory of its pod's node. Each helper
// talks to the backup storage location itself, with credentials and the
// repository password from a short-lived Secret.
type Helpers struct {
	Client kubernetes.Interface
	Run    *Run
	// Image is ferry's image, which the helper pods run.
	Image string
	// Env is the helpers' environment from their Secret: the location
	// (store.EnvStorage), the password (volumes.EnvPassword) and credentials.
	Env map[string]string
	// NodePodsDir is the kubelet pods directory on the nodes (default
	// DefaultNodePodsDir).
	NodePodsDir string
	// StartTimeout bounds the start of each helper (scheduling, binding,
	// mount, pull; default 10m); Unschedulable how long the scheduler may
	// find no node (default 30s); StallTimeout a helper that stops
	// reporting (default 5m).
	StartTimeout, Unschedulable, StallTimeout time.Duration
	// Parallel is how many helpers run at once (default 4).
	Parallel int
	Sparse   bool
	// OnVolume, if set, gets each volume's progress, and done at its end.
	OnVolume func(key string, p Progress, done bool)
}

// HelperEnv returns the Secret environment of helpers that use location
// URL locURL with password and credentials, under the keys of locURL's
// scheme (store.CredentialKeys), which the helpers need to reach the same
// bucket; other keys and empty values are left out. A file:// or mem:// location
// is not reachable from a pod, which is an error.
func HelperEnv(locURL, password string, credentials map[string]string) (map[string]string, error) {
	u, err := url.Parse(locURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("backup storage location %q: not a URL", store.Redact(locURL))
	}
	if u.Scheme == "file" || u.Scheme == "mem" {
		return nil, fmt.Errorf("backup storage location %s: helper pods in the cluster cannot reach a %s:// location; use an object store (s3://, gs://, azblob://), or run on the node, reading and writing its kubelet pods directory (HostPodsDir of backup.PodVolumeOptions or restore.PodVolumeOptions)", store.Redact(locURL), u.Scheme)
	}
	if ep := u.Query().Get("endpoint"); ep != "" {
		host := ep
		if eu, err := url.Parse(ep); err == nil && eu.Host != "" {
			host = eu.Hostname()
		}
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil, fmt.Errorf("backup storage location %s: endpoint %s is this machine's loopback address, which helper pods in the cluster cannot reach; give an address the cluster's nodes reach", store.Redact(locURL), ep)
		}
	}
	env := map[string]string{store.EnvStorage: locURL, volumes.EnvPassword: password}
	for _, k := range store.CredentialKeys(u.Scheme) {
		if v := credentials[k]; v != "" {
			env[k] = v
		}
	}
	return env, nil
}

func (h *Helpers) defaults() {
	if h.NodePodsDir == "" {
		h.NodePodsDir = DefaultNodePodsDir
	}
	if h.StartTimeout <= 0 {
		h.StartTimeout = 10 * time.Minute
	}
	if h.Unschedulable <= 0 {
		h.Unschedulable = 30 * time.Second
	}
	if h.StallTimeout <= 0 {
		h.StallTimeout = 5 * time.Minute
	}
	if h.Parallel <= 0 {
		h.Parallel = 4
	}
}

// helperRun is one helper pod's work for one volume.
type helperRun struct {
	key       string // for progress and errors
	namespace string
	job       Job
	claim     string // mounted at MountClaimDir when set
	readOnly  bool
	node      string // required node, if any
	tolerate  bool   // tolerate every taint (the data is on that node)
}

// run starts the helper pod of hr and decodes its outcome into out.
func (h *Helpers) run(ctx context.Context, hr helperRun, out *JobOutcome, onBytes func(Progress)) (*Outcome, error) {
	job, _ := json.Marshal(hr.job)
	purpose := "volume-" + hr.job.Op
	spec := Spec{
		Namespace: hr.namespace, Purpose: purpose, Target: hr.key, Secret: h.Env,
		Pod:          h.podSpec(hr, string(job)),
		StartTimeout: h.StartTimeout, Unschedulable: h.Unschedulable, StallTimeout: h.StallTimeout,
		OnLine: func(line []byte) {
			var p Progress
			if json.Unmarshal(line, &p) == nil {
				onBytes(p)
			}
		},
	}
	res, err := h.Run.Pod(ctx, spec)
	if err != nil {
		// A helper that failed may still have said why.
		if res != nil && res.Message != "" && DecodeMessage(res.Message, out) == nil {
			return res, nil
		}
		return res, err
	}
	if err := DecodeMessage(res.Message, out); err != nil {
		return res, &Error{Target: hr.key, Pod: res.Pod, Node: res.Node, Reason: err.Error()}
	}
	return res, nil
}

// PodSpecFor is the spec of a helper pod of image for a claim (claim
// true) or for the volumes in a node's pods directory, as Helpers run it:
// what the pre-flight check holds against a namespace's PodSecurity level.
func PodSpecFor(image string, claim bool) corev1.PodSpec {
	h := &Helpers{Image: image, NodePodsDir: "/var/lib/kubelet/pods"}
	hr := helperRun{job: Job{Op: OpRestore}}
	if claim {
		hr.claim = "claim"
	}
	return h.podSpec(hr, "{}")
}

// podSpec is the helper pod of hr: ferry's image as root, the claim or the
// node's pods directory mounted, pinned to hr.node when set.
func (h *Helpers) podSpec(hr helperRun, job string) corev1.PodSpec {
	root, no := int64(0), false
	c := corev1.Container{
		Name: ContainerName, Image: h.Image,
		Command: []string{"/usr/local/bin/ferry", "volume-helper"},
		Env:     []corev1.EnvVar{{Name: EnvJob, Value: job}},
		// Root, to read and write every file of a volume and keep owners
		// and modes, with only the capabilities that takes (all within
		// PodSecurity's baseline level).
		SecurityContext: &corev1.SecurityContext{RunAsUser: &root, AllowPrivilegeEscalation: &no,
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
	}
	ps := corev1.PodSpec{
		Volumes:                       []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		TerminationGracePeriodSeconds: new(int64),
		AutomountServiceAccountToken:  new(bool),
		EnableServiceLinks:            new(bool),
	}
	switch {
	case hr.job.Op == OpProbe && hr.job.Probe != nil && !hr.job.Probe.Size:
		// A probe's data is in its own emptyDir (/tmp): it reads no volume.
	case hr.claim != "":
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: hr.claim, ReadOnly: hr.readOnly}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: MountClaimDir, ReadOnly: hr.readOnly})
	default:
		dirType := corev1.HostPathDirectory
		prop := corev1.MountPropagationHostToContainer
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "pods", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: h.NodePodsDir, Type: &dirType}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "pods", MountPath: MountPodsDir, ReadOnly: hr.job.Op != OpRestore, MountPropagation: &prop})
	}
	if hr.node != "" {
		ps.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{hr.node}}}}},
		}}}
	}
	if hr.tolerate {
		ps.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	ps.Containers = []corev1.Container{c}
	return ps
}

// each runs do(i) for i in [0,n) on h.Parallel workers.
func (h *Helpers) each(n int, do func(i int)) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < h.Parallel && w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				do(i)
			}
		}()
	}
	wg.Wait()
}

// totals sums the running progress of several volumes.
type totals struct {
	mu   sync.Mutex
	base volumes.Totals
	cur  map[int]Progress
	on   func(volumes.Totals)
}

func (t *totals) set(i int, p Progress, done bool) {
	if t.on == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if done {
		delete(t.cur, i)
		t.base.VolumesDone++
		t.base.Bytes += p.Bytes
		t.base.Files += p.Files
	} else {
		t.cur[i] = p
	}
	sum := t.base
	for _, c := range t.cur {
		sum.Bytes += c.Bytes
		sum.Files += c.Files
	}
	t.on(sum)
}

// Backup backs up each volume in vols through a helper pod, Parallel at a
// time (the signature of backup.PodVolumeOptions.Backup). A claim is
// mounted read-only on the node its pod runs on (anywhere the scheduler
// can place it, when no pod runs); a ReadWriteOncePod claim, which no
// second pod may mount, and any other volume are read in the kubelet pods
// directory of the pod's node.
func (h *Helpers) Backup(ctx context.Context, backup string, vols []volumes.PodVolume, onProgress func(volumes.Totals)) []volumes.PodVolumeBackup {
	h.defaults()
	out := make([]volumes.PodVolumeBackup, len(vols))
	tot := &totals{base: volumes.Totals{Volumes: len(vols)}, cur: map[int]Progress{}, on: onProgress}
	modes := h.accessModes(ctx, vols)
	h.each(len(vols), func(i int) {
		v := vols[i]
		hr, err := readRun(v, modes, Job{Op: OpBackup, Backup: backup, Volume: v})
		if err != nil {
			out[i] = volumes.PodVolumeBackup{PodVolume: v, Error: err.Error()}
			return
		}
		var oc JobOutcome
		res, err := h.run(ctx, hr, &oc, func(p Progress) { tot.set(i, p, false); h.progress(hr.key, p, false) })
		switch {
		case err != nil:
			out[i] = volumes.PodVolumeBackup{PodVolume: v, Error: err.Error()}
		case oc.Backup == nil:
			out[i] = volumes.PodVolumeBackup{PodVolume: v, Error: hr.key + ": the helper reported no backup"}
		default:
			out[i] = *oc.Backup
			if out[i].Error != "" && !strings.HasPrefix(out[i].Error, hr.key) {
				out[i].Error = hr.key + ": " + out[i].Error
			}
		}
		var done Progress
		if out[i].SnapshotResult != nil {
			done = Progress{Bytes: out[i].Bytes, Files: out[i].Files}
		}
		if res != nil {
			out[i].HelperPod, out[i].HelperNode = res.Pod, res.Node
		}
		tot.set(i, done, true)
		h.progress(hr.key, done, true)
	})
	return out
}

// readRun is the helper run of a job that reads volume v (its backup, or
// its size): a claim is mounted read-only (on v's node when a pod runs
// there: a ReadWriteOnce volume is attached to that node), unless it is
// ReadWriteOncePod and a pod runs (modes); any other volume is read in
// the kubelet pods directory of its pod's node.
func readRun(v volumes.PodVolume, modes map[string]bool, job Job) (helperRun, error) {
	hr := helperRun{key: "volume " + v.Key(), namespace: v.Namespace, job: job, node: v.Node, tolerate: v.Node != ""}
	switch {
	case v.ClaimName != "" && (!modes[v.Namespace+"/"+v.ClaimName] || v.Node == ""):
		// A ReadWriteOncePod claim no pod runs on may be mounted too.
		hr.key = fmt.Sprintf("claim %s/%s", v.Namespace, v.ClaimName)
		if v.Pod != "" {
			hr.key += fmt.Sprintf(" (volume %s)", v.Key())
		}
		hr.claim, hr.readOnly = v.ClaimName, true
	case v.Node == "":
		return hr, fmt.Errorf("volume %s: the pod is not running on a node, and the volume is not a claim a helper pod can mount", v.Key())
	default:
		hr.job.PodsDir = MountPodsDir
	}
	return hr, nil
}

func (h *Helpers) progress(key string, p Progress, done bool) {
	if h.OnVolume != nil {
		h.OnVolume(key, p, done)
	}
}

// accessModes says, per claim (namespace/name), whether it is
// ReadWriteOncePod: then only the kubelet pods directory reaches it.
func (h *Helpers) accessModes(ctx context.Context, vols []volumes.PodVolume) map[string]bool {
	out := map[string]bool{}
	for _, v := range vols {
		key := v.Namespace + "/" + v.ClaimName
		if v.ClaimName == "" {
			continue
		}
		if _, seen := out[key]; seen {
			continue
		}
		out[key] = false
		pvc, err := h.Client.CoreV1().PersistentVolumeClaims(v.Namespace).Get(ctx, v.ClaimName, metav1.GetOptions{})
		if err != nil {
			continue
		}
		for _, m := range pvc.Spec.AccessModes {
			if m == corev1.ReadWriteOncePod {
				out[key] = true
			}
		}
	}
	return out
}

// RestoreClaims writes each claim's snapshot into it through a helper pod
// that mounts it (the claim's first consumer, which also binds a
// WaitForFirstConsumer claim), followed by the done-marker of restoreUID
// (Repository.RestoreClaim). A claim that holds the snapshot's done-marker
// already, whichever restore wrote it, is left as it is (AlreadyRestored);
// any other is written, unless the volumes.ClaimRestore keeps it.
func (h *Helpers) RestoreClaims(ctx context.Context, restoreUID string, claims []volumes.ClaimRestore, onProgress func(volumes.Totals)) []volumes.PodVolumeRestore {
	h.defaults()
	out := make([]volumes.PodVolumeRestore, len(claims))
	tot := &totals{base: volumes.Totals{Volumes: len(claims)}, cur: map[int]Progress{}, on: onProgress}
	h.each(len(claims), func(i int) {
		c := claims[i]
		v := c.Source
		v.Namespace, v.ClaimName = c.Namespace, c.Claim
		target := volumes.RestoreTarget{PodVolume: v, SnapshotID: c.SnapshotID}
		hr := helperRun{key: c.Key(), namespace: c.Namespace, claim: c.Claim,
			job: Job{Op: OpRestore, Volume: v, SnapshotID: c.SnapshotID, RestoreUID: restoreUID, Sparse: h.Sparse, Claim: true, KeepExisting: c.Keep}}
		out[i] = h.restoreOne(ctx, i, hr, target, tot)
	})
	return out
}

// RestorePodVolumes restores targets that are not claims (an opted-in
// emptyDir) into their pods' volume folders through a helper pod on each
// pod's node, with the node's pods directory mounted; the pods wait in
// their ferry-restore-wait init container (the signature of
// restore.PodVolumeOptions.Restore). MarkerOnly targets are not expected
// here: claims are restored before their pods exist (RestoreClaims).
func (h *Helpers) RestorePodVolumes(ctx context.Context, restoreUID string, targets []volumes.RestoreTarget, wait time.Duration, onProgress func(volumes.Totals)) []volumes.PodVolumeRestore {
	h.defaults()
	out := make([]volumes.PodVolumeRestore, len(targets))
	tot := &totals{base: volumes.Totals{Volumes: len(targets)}, cur: map[int]Progress{}, on: onProgress}
	h.each(len(targets), func(i int) {
		t := targets[i]
		out[i] = volumes.PodVolumeRestore{RestoreTarget: t}
		node, err := h.waitScheduled(ctx, t.Namespace, t.Pod, wait)
		if err != nil {
			out[i].Error = fmt.Sprintf("volume %s: %v", t.Key(), err)
			return
		}
		v := t.PodVolume
		hr := helperRun{key: "volume " + t.Key(), namespace: t.Namespace, node: node, tolerate: true,
			job: Job{Op: OpRestore, Volume: v, PodsDir: MountPodsDir, SnapshotID: t.SnapshotID, RestoreUID: t.MarkerUID(restoreUID), Sparse: h.Sparse}}
		out[i] = h.restoreOne(ctx, i, hr, t, tot)
	})
	return out
}

// restoreOne runs the restore helper pod of hr for target (the i-th of
// tot) and returns its outcome, errors prefixed with what it restores.
func (h *Helpers) restoreOne(ctx context.Context, i int, hr helperRun, target volumes.RestoreTarget, tot *totals) volumes.PodVolumeRestore {
	out := volumes.PodVolumeRestore{RestoreTarget: target}
	var oc JobOutcome
	res, err := h.run(ctx, hr, &oc, func(p Progress) { tot.set(i, p, false); h.progress(hr.key, p, false) })
	switch {
	case err != nil:
		out.Error = err.Error()
	case oc.Restore == nil:
		out.Error = hr.key + ": the helper reported no restore"
	default:
		out.Path, out.RestoreResult = oc.Restore.Path, oc.Restore.RestoreResult
		if oc.Restore.Error != "" {
			out.Error = hr.key + ": " + oc.Restore.Error
		}
	}
	if res != nil {
		out.HelperPod, out.HelperNode = res.Pod, res.Node
	}
	var done Progress
	if out.RestoreResult != nil {
		done = Progress{Bytes: out.Bytes, Files: out.Files}
	}
	tot.set(i, done, true)
	h.progress(hr.key, done, true)
	return out
}

// waitScheduled waits up to wait for pod ns/name to be on a node.
func (h *Helpers) waitScheduled(ctx context.Context, ns, name string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	var node string
	err := utilwait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil && p.Spec.NodeName != "":
			node = p.Spec.NodeName
			return true, nil
		case err != nil && !apierrors.IsNotFound(err):
			return false, err
		case time.Now().After(deadline):
			if err != nil {
				return false, fmt.Errorf("pod %s/%s: %w", ns, name, err)
			}
			return false, fmt.Errorf("pod %s/%s was not scheduled to a node within %s", ns, name, wait)
		}
		return false, nil
	})
	return node, err
}
