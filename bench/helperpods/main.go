// Command helperpods benchmarks ferry's helper-pod path for volume data
// (pkg/helperpod Helpers.Backup and Helpers.RestoreClaims: a short-lived pod
// running ferry's image mounts the claim and moves its data to or from
// the backup storage location, what "ferry backup create" and "ferry
// restore create" start when nothing of ferry is installed in the
// cluster) against the kopia CLI (v0.22.3, the version pkg/volumes links)
// run on the node over the same directory, side by side in one run.
//
// Setup (untimed). A local registry gets ferry's image ("make image"), an
// S3 server (versitygw) gets a bucket, and one cluster with a real node
// starts (internal/testenv: kubelet, containerd, the host-path
// provisioner of the default StorageClass "standard", which binds claims
// at once). A warm-up pod pulls ferry's image to the node, so that no
// timed helper pays for the pull (a node pulls it once). A claim "data"
// in namespace "bench" is created, and once it is bound the mixed data set
// of bench/volumes (default 2 GiB: half one disk image, a quarter in 24
// files, a quarter in small files of 1-40 KiB in 200 folders; random
// bytes) is written straight into its PersistentVolume's host directory.
//
// Each round creates, untimed, two fresh repositories in the same bucket
// under different prefixes, in the same format (AES256-GCM-HMAC-SHA256,
// BLAKE2B-256-128, no compression, splitter DYNAMIC-1M-BUZHASH), without
// local caches, maintenance or logs (as bench/volumes: see its comment),
// then times, the order alternating by round (kopia first in odd rounds),
// dirty pages flushed (sync) before each timed operation:
//
//   - kopia, backup: "kopia snapshot create PVDIR" (S3 storage, in this
//     process's network namespace, like a program run on the node);
//   - kopia, restore: "kopia restore SNAPSHOT DIR" into an empty folder on
//     the same disk;
//   - ferry, backup: Helpers.Backup of the claim (one helper pod, placed
//     by the scheduler, that mounts the claim read-only and snapshots it
//     into the s3:// location it reaches over the node's network);
//   - ferry, restore: Helpers.RestoreClaims into a fresh empty claim,
//     created and bound before the timing.
//
// For kopia the time is the child's wall clock, start to exit, and its
// CPU time and peak RSS are from getrusage, read by a small launcher
// process (this program with -launch) between this one and kopia: a
// child's ru_maxrss counts the memory of the process it was started
// from, and this one is large (see benchutil.Child). For ferry, the total
// is the wall clock of the Helpers call (Secret and pod created,
// scheduled, container started, ferry's process opens the location and
// the repository, moves the data, writes its outcome and exits; the pod is
// seen Succeeded and deleted); the data part is the helper's own Duration
// of the snapshot or the restore (SnapshotResult.Duration,
// RestoreResult.Duration: Repository.Snapshot's upload and flush,
// Repository.Restore's staging, move and marker; opening the repository
// is not in it); the fixed cost is total minus data part. Within it: the
// pod start, the pod's creationTimestamp to its container's startedAt
// (from the pod's status, whole seconds); the time until the helper
// works, the call's start to the helper's first progress line (printed
// once it has opened the repository; the container runtime's log
// timestamp); and, in the JSON, when this process's watch saw the
// container exit and the pod Succeeded. The helper pod's CPU time and
// peak RSS are sampled from its cgroups (cpuacct.usage, memory.stat
// total_rss; cgroup v1) every 250 ms.
//
// The ratios are kopia's time ÷ ferry's, of the data part (target ≥ 0.9)
// and of the total, above 1.0 ferry is faster: the median of each round's
// ratio (the two tools of a round run minutes apart; other work on the
// machine changes more between rounds), with every round's listed, and
// medians of the times. Both restores are compared
// with the source claim's directory strictly (volumetest.Compare: bytes,
// modes, modification times of every file and folder); any difference
// fails the run.
//
// Run from the repository root, as root, in a network namespace of its own:
//
//	make bench-helperpods
//	go run -exec hack/netns-exec.sh ./bench/helperpods -size 256MiB -rounds 1
//
// "-report FILE" prints the tables of an earlier run's JSON result again.
//
// The kopia CLI is built on first use into ~/.cache/ferry/bin/kopia (see
// bench/volumes), which needs the network: "-install-kopia" does only that,
// outside the namespace (the Makefile target runs it first). A Markdown
// table goes to stdout, progress to stderr, everything to
// bench/results/helperpods.json.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

const (
	password  = "bench repository password"
	prog      = "bench/helperpods"
	namespace = "bench"
	bucket    = "ferry"
	claim     = "data"
)

func main() {
	size := flag.String("size", "2GiB", "size of the data set (B, KiB, MiB, GiB)")
	rounds := flag.Int("rounds", 3, "rounds (kopia and ferry alternate which goes first: kopia in odd rounds)")
	kopiaBin := flag.String("kopia", "", "kopia CLI (default ~/.cache/ferry/bin/kopia, built on first use)")
	install := flag.Bool("install-kopia", false, "only build the kopia CLI if it is missing (needs the network: run it outside hack/netns-exec.sh)")
	out := flag.String("out", "bench/results/helperpods.json", "JSON result, relative to the repository root")
	launch := flag.Bool("launch", false, "internal: run the command in the arguments and print its usage (JSON)")
	again := flag.String("report", "", "only print the tables of an earlier run's JSON result")
	flag.Parse()
	if *again != "" {
		if err := reprint(*again); err != nil {
			benchutil.Logf(prog, "error: %v", err)
			os.Exit(1)
		}
		return
	}
	if *launch {
		// A small process between this one and the measured child: see
		// benchutil.Child on the peak RSS of a large parent's child.
		u, err := benchutil.ChildUsage(context.Background(), flag.Arg(0), flag.Args()[1:]...)
		if err != nil && u.Code == 0 {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(launched{Secs: u.Wall.Seconds(), RSSMiB: u.RSSMiB, CPUSecs: u.CPU.Seconds(), Code: u.Code, Stderr: benchutil.Tail(string(u.Stderr), 500)})
		return
	}
	if *install {
		bin, err := benchutil.InstallKopia(prog)
		if err != nil {
			benchutil.Logf(prog, "error: %v", err)
			os.Exit(1)
		}
		benchutil.Logf(prog, "kopia CLI: %s", bin)
		return
	}
	n, err := parseSize(*size)
	if err != nil || *rounds < 1 {
		benchutil.Logf(prog, "error: -size %q: %v; -rounds %d (at least 1)", *size, err, *rounds)
		os.Exit(2)
	}
	if err := run(n, *rounds, *kopiaBin, *out); err != nil {
		benchutil.Logf(prog, "error: %v", err)
		os.Exit(1)
	}
}

// parseSize reads "2GiB", "256MiB", "1.5GiB", "64KiB" or bytes.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f <= 0 {
		return 0, errors.New("want a positive size such as 2GiB or 256MiB")
	}
	return int64(f * float64(mult)), nil
}

// launched is what "-launch" prints about the command it ran.
type launched struct {
	Secs    float64 `json:"seconds"`
	RSSMiB  float64 `json:"peakRSSMiB"`
	CPUSecs float64 `json:"cpuSeconds"`
	Code    int     `json:"code"`
	Stderr  string  `json:"stderr"`
}

// sample is one timed operation.
type sample struct {
	Tool  string  `json:"tool"`
	Op    string  `json:"op"`
	Round int     `json:"round"`
	Secs  float64 `json:"seconds"`
	MiBps float64 `json:"mibPerSecond"`
	// RSSMiB: kopia's peak RSS (getrusage); the helper pod's sampled peak
	// (its memory cgroup's total_rss), 0 if not read.
	RSSMiB float64 `json:"peakRSSMiB"`
	// CPUSecs: kopia's user and system time (getrusage); the helper pod's
	// (its cpuacct cgroup's usage, sampled every 250 ms: its last sample).
	CPUSecs float64 `json:"cpuSeconds"`
	// ferry only: the helper's own Duration of the data part, total minus
	// it, and the pod's creation to its container's start (status, whole
	// seconds); FirstLineSecs is the call's start to the helper's first
	// progress line (printed once it has opened the repository), from
	// the container runtime's log timestamps; DoneSeenSecs and
	// PhaseSeenSecs the call's start to when this process's watch saw the
	// container terminated and the pod Succeeded.
	DataSecs      float64 `json:"dataSeconds,omitempty"`
	DataMiBps     float64 `json:"dataMiBPerSecond,omitempty"`
	FixedSecs     float64 `json:"fixedSeconds,omitempty"`
	PodStartSecs  float64 `json:"podStartSeconds,omitempty"`
	FirstLineSecs float64 `json:"untilFirstLineSeconds,omitempty"`
	DoneSeenSecs  float64 `json:"untilExitSeenSeconds,omitempty"`
	PhaseSeenSecs float64 `json:"untilSucceededSeenSeconds,omitempty"`
	Pod           string  `json:"pod,omitempty"`
	Node          string  `json:"node,omitempty"`
}

// bench is one run: the cluster, the S3 server, the programs, the samples.
type bench struct {
	k        kubernetes.Interface
	c        *testenv.Cluster
	s3       *testenv.S3
	image    string
	kopiaBin string
	self     string // this program, for -launch
	work     string
	src      string // the source claim's PersistentVolume directory
	size     int64
	creds    map[string]string
	samples  []sample
}

func run(size int64, rounds int, kopiaBin, out string) error {
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if kopiaBin == "" {
		if kopiaBin, err = benchutil.InstallKopia(prog); err != nil {
			return fmt.Errorf("%w (build it first, outside the network namespace: go run ./bench/helperpods -install-kopia)", err)
		}
	}
	work, err := os.MkdirTemp("", "ferry-bench-helperpods-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b := &bench{kopiaBin: kopiaBin, self: self, work: work}
	loadStart := loadAvg()

	benchutil.Logf(prog, "starting the registry and pushing ferry's image (make image)")
	reg, err := testenv.StartRegistry(ctx, nil, testenv.RegistryOptions{})
	if err != nil {
		return err
	}
	defer reg.Stop()
	if b.image, err = makeImage(root, reg, filepath.Join(work, "image-bin")); err != nil {
		return err
	}
	if b.s3, err = testenv.StartS3(ctx, nil); err != nil {
		return err
	}
	defer b.s3.Stop()
	if err := b.s3.CreateBucket(ctx, bucket); err != nil {
		return err
	}
	b.creds = map[string]string{store.EnvAWSAccessKeyID: b.s3.AccessKey, store.EnvAWSSecretAccessKey: b.s3.SecretKey, store.EnvAWSRegion: testenv.S3Region}
	benchutil.Logf(prog, "starting a cluster with a node")
	cs, err := testenv.StartNodeClusters(ctx, nil, reg, "bench")
	if err != nil {
		return err
	}
	b.c = cs[0]
	defer func() {
		if err := b.c.Stop(); err != nil {
			benchutil.Logf(prog, "%v", err)
		}
	}()
	if b.k, err = kubernetes.NewForConfig(b.c.Config); err != nil {
		return err
	}
	if _, err := b.k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	pull, err := b.warmUp(ctx)
	if err != nil {
		return err
	}
	benchutil.Logf(prog, "warm-up pod (pulls ferry's image): %.1f s from creation to exit", pull)
	if b.src, err = b.newClaim(ctx, claim); err != nil {
		return err
	}
	benchutil.Logf(prog, "writing the %.0f MiB data set into claim %s/%s (%s)", float64(size)/(1<<20), namespace, claim, b.src)
	n, files, err := benchutil.MakeDataSet(b.src, size)
	if err != nil {
		return err
	}
	b.size = n
	benchutil.Logf(prog, "data set: %d files, %.0f MiB", files, float64(n)/(1<<20))

	for round := 1; round <= rounds; round++ {
		if err := b.round(ctx, round); err != nil {
			return err
		}
	}
	report(b.samples, n, files, kopiaBin)
	var uts syscall.Utsname
	_ = syscall.Uname(&uts)
	return benchutil.WriteJSON(filepath.Join(root, out), map[string]any{
		"time": time.Now().UTC(), "commit": benchutil.GitCommit(root), "goVersion": runtime.Version(), "cpus": runtime.NumCPU(), "kernel": utsString(uts.Release[:]),
		"bytes": n, "files": files, "kopia": benchutil.KopiaVersion, "kopiaCLI": kopiaBin, "splitter": volumes.Splitter, "image": b.image,
		"imagePullSeconds": pull, "loadAverageAtStart": loadStart, "loadAverageAtEnd": loadAvg(), "samples": b.samples,
	})
}

// loadAvg is /proc/loadavg's first three fields: other work on the
// machine shows in the numbers.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func utsString(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// makeImage builds ferry's image and pushes it to reg (as the e2e tests
// do), returning its reference as the node pulls it.
func makeImage(root string, reg *testenv.Registry, bin string) (string, error) {
	cmd := exec.Command("make", "image", "IMAGE="+reg.Host+"/ferry:bench", "IMAGE_INSECURE=1", "BIN="+bin)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make image: %v\n%s", err, out)
	}
	if _, ok := reg.Digest("ferry:bench"); !ok {
		return "", errors.New("make image pushed nothing to ferry:bench")
	}
	return reg.NodeHost + "/ferry:bench", nil
}

// warmUp runs ferry's image once ("ferry version"), so that the node has
// pulled it before any timed helper, and returns how long that took.
func (b *bench) warmUp(ctx context.Context) (float64, error) {
	pods := b.k.CoreV1().Pods(namespace)
	start := time.Now()
	p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "warm-up"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: new(int64), AutomountServiceAccountToken: new(bool),
		Containers: []corev1.Container{{Name: "ferry", Image: b.image, Command: []string{"/usr/local/bin/ferry", "version"}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(5 * time.Minute); ; {
		if p, err = pods.Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
			return 0, err
		}
		if p.Status.Phase == corev1.PodSucceeded {
			break
		}
		if p.Status.Phase == corev1.PodFailed || time.Now().After(deadline) {
			return 0, fmt.Errorf("warm-up pod: phase %s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(start).Seconds()
	return took, pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
}

// newClaim creates claim name in the bench namespace, waits until it is
// bound (the default class binds at once) and returns its
// PersistentVolume's directory on the node.
func (b *bench) newClaim(ctx context.Context, name string) (string, error) {
	pvcs := b.k.CoreV1().PersistentVolumeClaims(namespace)
	_, err := pvcs.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		pvc, err := pvcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			continue
		}
		pv, err := b.k.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if pv.Spec.HostPath == nil {
			return "", fmt.Errorf("claim %s: volume %s is not a hostPath volume", name, pv.Name)
		}
		if _, err := os.Stat(pv.Spec.HostPath.Path); err != nil {
			return "", fmt.Errorf("claim %s: %w", name, err)
		}
		return pv.Spec.HostPath.Path, nil
	}
	return "", fmt.Errorf("claim %s/%s not bound after 2m", namespace, name)
}

// deleteClaim deletes claim name and waits until its volume, and with it
// the volume's directory (reclaim policy Delete), is gone, so that no
// deletion runs during the next timed operation.
func (b *bench) deleteClaim(ctx context.Context, name, dir string) error {
	pvc, err := b.k.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := b.k.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		_, err := b.k.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
	}
	// The provisioner's deleter removes the folder; make sure.
	return os.RemoveAll(dir)
}

// round runs one round: both repositories created, then each tool's
// backup and restore, checked, in this round's order.
func (b *bench) round(ctx context.Context, round int) error {
	order := []string{"kopia", "ferry"}
	if round%2 == 0 {
		order = []string{"ferry", "kopia"}
	}
	prefix := func(tool string) string { return fmt.Sprintf("r%d-%s/", round, tool) }
	dir := filepath.Join(b.work, fmt.Sprintf("r%d", round))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Both repositories exist before either tool's timed backup.
	ep := strings.TrimPrefix(b.s3.Endpoint, "http://")
	k := benchutil.KopiaCLI{Bin: b.kopiaBin, Config: filepath.Join(dir, "kopia.config"), Password: password}
	if err := k.Create(ctx, "s3", "--bucket", bucket, "--endpoint", ep, "--disable-tls", "--prefix", prefix("kopia"), "--region", testenv.S3Region,
		"--access-key", b.s3.AccessKey, "--secret-access-key", b.s3.SecretKey); err != nil {
		return err
	}
	if err := b.ferryInit(ctx, prefix("ferry")); err != nil {
		return err
	}
	for _, tool := range order {
		var err error
		if tool == "kopia" {
			err = b.kopiaRound(ctx, round, k, filepath.Join(dir, "kopia-restored"))
		} else {
			err = b.ferryRound(ctx, round, prefix("ferry"))
		}
		if err != nil {
			return err
		}
	}
	// The repositories go (the posix backend keeps objects as files).
	for _, tool := range order {
		if err := os.RemoveAll(filepath.Join(b.s3.Dir, bucket, strings.TrimSuffix(prefix(tool), "/"))); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}

// locURL is the s3:// location of ferry's repository under prefix, at
// endpoint (this process's, or the one nodes reach).
func locURL(endpoint, prefix string) string {
	return fmt.Sprintf("s3://%s?endpoint=%s&use_path_style=true&region=%s&prefix=%s", bucket, endpoint, testenv.S3Region, prefix)
}

// ferryInit creates ferry's repository under prefix, untimed.
func (b *bench) ferryInit(ctx context.Context, prefix string) error {
	loc, err := store.Open(ctx, locURL(b.s3.Endpoint, prefix), store.WithCredentials(b.creds))
	if err != nil {
		return err
	}
	defer loc.Close()
	r, err := volumes.Open(ctx, loc, password, volumes.OpenOptions{Create: true})
	if err != nil {
		return err
	}
	return r.Close(ctx)
}

// kopiaRound times the kopia CLI's backup of the source claim's directory
// and its restore into the empty folder restored, and checks the restore.
func (b *bench) kopiaRound(ctx context.Context, round int, k benchutil.KopiaCLI, restored string) error {
	if err := os.MkdirAll(restored, 0o755); err != nil {
		return err
	}
	for _, op := range []string{"backup", "restore"} {
		args := k.Args("snapshot", "create", b.src, "--no-progress")
		if op == "restore" {
			id, err := k.LatestSnapshot(ctx, b.src)
			if err != nil {
				return err
			}
			args = k.Args("restore", id, restored, "--no-progress")
		}
		syscall.Sync()
		o, e, _, _, code, err := benchutil.Child(ctx, b.self, append([]string{"-launch", "--", "env"}, args...)...)
		var l launched
		if err == nil && code == 0 {
			err = json.Unmarshal(o, &l)
		}
		if err == nil && l.Code != 0 {
			err, e = fmt.Errorf("exit %d", l.Code), []byte(l.Stderr)
		}
		if err != nil {
			return fmt.Errorf("kopia %s: %v %s", op, err, benchutil.Tail(string(e), 500))
		}
		b.add(sample{Tool: "kopia", Op: op, Round: round, Secs: l.Secs, RSSMiB: l.RSSMiB, CPUSecs: l.CPUSecs})
	}
	if err := k.NoMaintenance(ctx); err != nil {
		return err
	}
	if err := benchutil.CheckRestore("kopia", b.src, restored); err != nil {
		return err
	}
	return os.RemoveAll(restored)
}

// add completes s (throughputs, fixed cost), records and logs it.
func (b *bench) add(s sample) {
	mib := float64(b.size) / (1 << 20)
	s.MiBps = mib / s.Secs
	if s.DataSecs > 0 {
		s.DataMiBps = mib / s.DataSecs
		s.FixedSecs = s.Secs - s.DataSecs
	}
	b.samples = append(b.samples, s)
	if s.Tool == "kopia" {
		benchutil.Logf(prog, "round %d kopia %s: %.1f s, %.0f MiB/s, CPU %.1f s, peak RSS %.0f MiB", s.Round, s.Op, s.Secs, s.MiBps, s.CPUSecs, s.RSSMiB)
		return
	}
	benchutil.Logf(prog, "round %d ferry %s: total %.1f s (%.0f MiB/s), data part %.1f s (%.0f MiB/s), fixed %.1f s (pod start %.0f s; at %.1f s first line, %.1f s exit seen, %.1f s Succeeded seen), helper CPU %.1f s, peak RSS %.0f MiB",
		s.Round, s.Op, s.Secs, s.MiBps, s.DataSecs, s.DataMiBps, s.FixedSecs, s.PodStartSecs, s.FirstLineSecs, s.DoneSeenSecs, s.PhaseSeenSecs, s.CPUSecs, s.RSSMiB)
}

// ferryRound times the helper pods' backup of the source claim into the
// location under prefix and their restore into a fresh claim, and checks
// the restore.
func (b *bench) ferryRound(ctx context.Context, round int, prefix string) error {
	env, err := helperpod.HelperEnv(locURL(b.s3.NodeEndpoint, prefix), password, b.creds)
	if err != nil {
		return err
	}
	h := &helperpod.Helpers{Client: b.k, Image: b.image, Env: env, NodePodsDir: filepath.Join(b.c.Node.RootDir, "pods"), Parallel: 1}
	vol := volumes.PodVolume{Namespace: namespace, Volume: claim, Type: "persistentVolumeClaim", ClaimName: claim, Identity: "pvc/" + namespace + "/" + claim}

	var snapshotID string
	s, err := b.helperOp(ctx, h, func() (string, string, *volumes.Duration, string) {
		out := h.Backup(ctx, fmt.Sprintf("bench-r%d", round), []volumes.PodVolume{vol}, nil)
		if len(out) != 1 || out[0].Error != "" || out[0].SnapshotResult == nil {
			return "", "", nil, fmt.Sprintf("%+v", out)
		}
		snapshotID = out[0].SnapshotID
		return out[0].HelperPod, out[0].HelperNode, &out[0].Duration, ""
	})
	if err != nil {
		return fmt.Errorf("ferry backup: %w", err)
	}
	s.Op, s.Round = "backup", round
	b.add(s)

	target := fmt.Sprintf("restored-r%d", round)
	dir, err := b.newClaim(ctx, target)
	if err != nil {
		return err
	}
	s, err = b.helperOp(ctx, h, func() (string, string, *volumes.Duration, string) {
		out := h.RestoreClaims(ctx, fmt.Sprintf("bench-r%d", round), []volumes.ClaimRestore{{Namespace: namespace, Claim: target, SnapshotID: snapshotID, Source: vol}}, nil)
		if len(out) != 1 || out[0].Error != "" || out[0].RestoreResult == nil {
			return "", "", nil, fmt.Sprintf("%+v", out)
		}
		return out[0].HelperPod, out[0].HelperNode, &out[0].Duration, ""
	})
	if err != nil {
		return fmt.Errorf("ferry restore: %w", err)
	}
	s.Op, s.Round = "restore", round
	b.add(s)
	if err := benchutil.CheckRestore("ferry", b.src, dir); err != nil {
		return err
	}
	return b.deleteClaim(ctx, target, dir)
}

// helperOp times do, one Helpers call with one helper pod, in a helper run
// of its own (as each ferry command has), while watching the pod. do
// returns the pod, its node and the helper's Duration, or why it failed.
func (b *bench) helperOp(ctx context.Context, h *helperpod.Helpers, do func() (pod, node string, d *volumes.Duration, failure string)) (sample, error) {
	h.Run = helperpod.NewRun(b.k, nil)
	defer h.Run.Close(ctx)
	w, err := b.watchHelpers(ctx)
	if err != nil {
		return sample{}, err
	}
	syscall.Sync()
	start := time.Now()
	pod, node, d, failure := do()
	wall := time.Since(start)
	w.stop()
	if failure != "" {
		return sample{}, errors.New(failure)
	}
	s := sample{Tool: "ferry", Secs: wall.Seconds(), DataSecs: time.Duration(*d).Seconds(), Pod: pod, Node: node}
	w.mu.Lock()
	defer w.mu.Unlock()
	if p := w.last[pod]; p != nil {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != helperpod.ContainerName {
				continue
			}
			var started time.Time
			if cs.State.Terminated != nil {
				started = cs.State.Terminated.StartedAt.Time
			} else if cs.State.Running != nil {
				started = cs.State.Running.StartedAt.Time
			}
			if !started.IsZero() {
				s.PodStartSecs = started.Sub(p.CreationTimestamp.Time).Seconds()
			}
		}
	} else {
		benchutil.Logf(prog, "warning: helper pod %s was not seen by the watch", pod)
	}
	if t, ok := w.firstLine[pod]; ok {
		s.FirstLineSecs = t.Sub(start).Seconds()
	}
	if t, ok := w.doneSeen[pod]; ok {
		s.DoneSeenSecs = t.Sub(start).Seconds()
	}
	if t, ok := w.phaseSeen[pod]; ok {
		s.PhaseSeenSecs = t.Sub(start).Seconds()
	}
	s.RSSMiB = float64(w.peakRSS[pod]) / (1 << 20)
	s.CPUSecs = float64(w.cpu[pod]) / 1e9
	return s, nil
}

// helperWatch follows the helper pods of the bench namespace while one
// operation runs: each pod's last state before its deletion, the time of
// its first log line, and its sampled peak RSS.
type helperWatch struct {
	b         *bench
	mu        sync.Mutex
	last      map[string]*corev1.Pod
	firstLine map[string]time.Time
	peakRSS   map[string]int64
	cpu       map[string]int64 // ns
	doneSeen  map[string]time.Time
	phaseSeen map[string]time.Time
	following map[string]bool
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func (b *bench) watchHelpers(ctx context.Context) (*helperWatch, error) {
	sel := metav1.ListOptions{LabelSelector: helperpod.LabelManagedBy + "=" + helperpod.ManagedBy}
	pods := b.k.CoreV1().Pods(namespace)
	l, err := pods.List(ctx, sel)
	if err != nil {
		return nil, err
	}
	sel.ResourceVersion = l.ResourceVersion
	wi, err := pods.Watch(ctx, sel)
	if err != nil {
		return nil, err
	}
	w := &helperWatch{b: b, last: map[string]*corev1.Pod{}, firstLine: map[string]time.Time{}, peakRSS: map[string]int64{}, cpu: map[string]int64{}, doneSeen: map[string]time.Time{}, phaseSeen: map[string]time.Time{}, following: map[string]bool{}}
	w.ctx, w.cancel = context.WithCancel(ctx)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer wi.Stop()
		for {
			select {
			case <-w.ctx.Done():
				return
			case ev, ok := <-wi.ResultChan():
				if !ok {
					return
				}
				if p, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type != watch.Deleted {
					w.seen(p)
				}
			}
		}
	}()
	return w, nil
}

// seen records p and, once its container runs, starts following its log
// and sampling its memory.
func (w *helperWatch) seen(p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[p.Name] = p
	if _, ok := w.phaseSeen[p.Name]; !ok && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
		w.phaseSeen[p.Name] = time.Now()
	}
	for _, cs := range p.Status.ContainerStatuses {
		if _, ok := w.doneSeen[p.Name]; !ok && cs.Name == helperpod.ContainerName && cs.State.Terminated != nil {
			w.doneSeen[p.Name] = time.Now()
		}
	}
	if w.following[p.Name] {
		return
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == helperpod.ContainerName && (cs.State.Running != nil || cs.State.Terminated != nil) {
			w.following[p.Name] = true
			w.wg.Add(2)
			go w.follow(p.Name)
			go w.sampleRSS(p.Name, string(p.UID))
		}
	}
}

// follow reads the time of the helper's first log line (its first
// progress line, printed once the repository is open) from the log's
// timestamps, which the container runtime writes.
func (w *helperWatch) follow(name string) {
	defer w.wg.Done()
	rc, err := w.b.k.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{Container: helperpod.ContainerName, Follow: true, Timestamps: true}).Stream(w.ctx)
	if err != nil {
		return
	}
	defer rc.Close()
	line, err := bufio.NewReader(rc).ReadString('\n')
	if err != nil && line == "" {
		return
	}
	ts, _, _ := strings.Cut(line, " ")
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
		w.mu.Lock()
		w.firstLine[name] = t
		w.mu.Unlock()
	}
}

// sampleRSS reads the total_rss of the pod's memory cgroup and the usage
// of its cpuacct cgroup (cgroup v1, the kubelet's cgroupfs driver under
// the node's cgroup root; a BestEffort pod) every 250 ms, until the pod's
// cgroup is gone or the watch stops.
func (w *helperWatch) sampleRSS(name, uid string) {
	defer w.wg.Done()
	pod := filepath.Join(w.b.c.Node.Netns, "kubepods", "besteffort", "pod"+uid)
	memStat, cpuUsage := filepath.Join("/sys/fs/cgroup/memory", pod, "memory.stat"), filepath.Join("/sys/fs/cgroup/cpuacct", pod, "cpuacct.usage")
	seen := false
	sample := func() bool {
		data, err := os.ReadFile(memStat)
		if err != nil {
			return false
		}
		var rss int64
		for _, l := range bytes.Split(data, []byte("\n")) {
			if v, ok := bytes.CutPrefix(l, []byte("total_rss ")); ok {
				rss, _ = strconv.ParseInt(string(v), 10, 64)
			}
		}
		var ns int64
		if u, err := os.ReadFile(cpuUsage); err == nil {
			ns, _ = strconv.ParseInt(strings.TrimSpace(string(u)), 10, 64)
		}
		w.mu.Lock()
		w.peakRSS[name] = max(w.peakRSS[name], rss)
		w.cpu[name] = max(w.cpu[name], ns)
		w.mu.Unlock()
		return true
	}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		ok := sample()
		if !ok && seen {
			return
		}
		seen = seen || ok
		select {
		case <-w.ctx.Done():
			sample() // the cgroup outlives the container a little
			return
		case <-t.C:
		}
	}
}

func (w *helperWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// reprint prints the tables of the JSON result at path.
func reprint(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r struct {
		Bytes    int64    `json:"bytes"`
		Files    int      `json:"files"`
		KopiaCLI string   `json:"kopiaCLI"`
		Samples  []sample `json:"samples"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	report(r.Samples, r.Bytes, r.Files, benchutil.OrDash(r.KopiaCLI))
	return nil
}

// report prints the medians, and the ratios kopia ÷ ferry as the median
// of each round's ratio: a round's two tools run minutes apart, rounds
// further apart, and other work on the machine comes and goes.
func report(samples []sample, size int64, files int, kopiaBin string) {
	rounds := len(samples) / 4
	fmt.Printf("Data set: %d files, %.2f GiB in a claim; kopia CLI %s (%s) on the node; ferry's helper pods; medians of %d rounds\n\n",
		files, float64(size)/(1<<30), benchutil.KopiaVersion, kopiaBin, rounds)
	mib := float64(size) / (1 << 20)
	med := func(op, tool string, f func(sample) float64) float64 {
		var xs []float64
		for _, s := range samples {
			if s.Op == op && s.Tool == tool {
				xs = append(xs, f(s))
			}
		}
		return benchutil.Median(xs)
	}
	// ratios are kopia's time ÷ ferry's f, per round.
	ratios := func(op string, f func(sample) float64) []float64 {
		kopia, ferry := map[int]float64{}, map[int]float64{}
		for _, s := range samples {
			if s.Op == op && s.Tool == "kopia" {
				kopia[s.Round] = s.Secs
			} else if s.Op == op {
				ferry[s.Round] = f(s)
			}
		}
		var out []float64
		for r := 1; r <= rounds; r++ {
			out = append(out, kopia[r]/ferry[r])
		}
		return out
	}
	list := func(xs []float64) string {
		var parts []string
		for _, x := range xs {
			parts = append(parts, fmt.Sprintf("%.2f", x))
		}
		return strings.Join(parts, ", ")
	}
	secs := func(s sample) float64 { return s.Secs }
	data := func(s sample) float64 { return s.DataSecs }
	fmt.Println("| operation | kopia CLI | ferry total | ferry fixed cost (total − data) | of it, pod start | of it, until the helper works | ferry data part | kopia ÷ ferry data | kopia ÷ ferry total |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, op := range []string{"backup", "restore"} {
		k, t, d := med(op, "kopia", secs), med(op, "ferry", secs), med(op, "ferry", data)
		fmt.Printf("| %s | %.1f s (%.0f MiB/s) | %.1f s (%.0f MiB/s) | %.1f s | %.0f s | %.1f s | %.1f s (%.0f MiB/s) | **%.2f** | %.2f |\n",
			op, k, mib/k, t, mib/t, med(op, "ferry", func(s sample) float64 { return s.FixedSecs }), med(op, "ferry", func(s sample) float64 { return s.PodStartSecs }),
			med(op, "ferry", func(s sample) float64 { return s.FirstLineSecs }), d, mib/d, benchutil.Median(ratios(op, data)), benchutil.Median(ratios(op, secs)))
	}
	fmt.Println()
	fmt.Println("| operation | kopia CPU | helper pod CPU | kopia peak RSS | helper pod peak RSS |")
	fmt.Println("|---|--:|--:|--:|--:|")
	for _, op := range []string{"backup", "restore"} {
		fmt.Printf("| %s | %.1f s | %.1f s | %.0f MiB | %.0f MiB |\n", op,
			med(op, "kopia", func(s sample) float64 { return s.CPUSecs }), med(op, "ferry", func(s sample) float64 { return s.CPUSecs }),
			med(op, "kopia", func(s sample) float64 { return s.RSSMiB }), med(op, "ferry", func(s sample) float64 { return s.RSSMiB }))
	}
	fmt.Printf("\nPer round (kopia first in odd rounds), kopia's time ÷ ferry's data part: backup %s; restore %s. ÷ ferry's total: backup %s; restore %s\n",
		list(ratios("backup", data)), list(ratios("restore", data)), list(ratios("backup", secs)), list(ratios("restore", secs)))
}
