// Command cutover measures a staged migration's downtime against a
// stop-the-world migration's of the same namespace, side by side in one
// run, and the cutover's downtime against its own prediction.
//
// Setup (untimed). A local registry gets ferry's image ("make image"), an
// S3 server (versitygw) gets a bucket, and two clusters with a real node
// each start (internal/testenv). In the source, namespace "db" gets a
// claim "data" holding the mixed data set of bench/volumes (default
// 2 GiB), written into its volume's host directory, and a Deployment
// "writer" that mounts it and keeps writing: 256 KiB of random bytes
// appended every second to a segment file of 8 MiB (the write-ahead log
// of a database), and a real database beside it, etcd, with a writer
// putting a key every 50 ms. After the cutover the target's etcd must
// hold every key its writer acknowledged.
//
// Then, with the ferry binary (bin/ferry):
//  1. "ferry migrate stage st" twice (the first copies everything and
//     pulls ferry's image on both nodes; untimed);
//  2. the stop-the-world migration: the writer scaled to 0, "ferry
//     migrate --name stw" of namespace db into namespace stw of the
//     target, through a bucket of its own (its copy is whole, as a move
//     without stages is; its verification waits until the target's
//     writer runs), the source's writer scaled back. Its downtime is from
//     the scale down to the migrate's exit. The same again as "stw-inc"
//     through the stages' location, for reference: its backup uploads
//     only what the stages did not;
//  3. "ferry migrate stage st" again (catching up on what the writer
//     wrote meanwhile), a wait until about -change (default 1%) of the
//     data set was written since, then "ferry migrate cutover st" into
//     namespace staged. Its downtime and prediction are the journal's.
//
// It prints a Markdown table (downtimes, the ratio of the cutover's to
// the stop-the-world's, target at most 0.25, and the cutover's actual
// against its predicted downtime, target within 2x) and writes
// bench/results/cutover.json.
//
// Run from the repository root, as root, in a network namespace of its
// own (make bench-cutover):
//
//	go run -exec hack/netns-exec.sh ./bench/cutover -size 2GiB
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
	"github.com/kubeferry/ferry/internal/testenv"
	enginemigration "github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

const (
	prog      = "cutover"
	namespace = "db"
	bucket    = "ferry-bench"
	stwBucket = "ferry-bench-stw"
	// writeRate is what the writer appends per second.
	writeRate = 256 << 10
)

// writer appends writeRate bytes a second to 8 MiB segment files.
const writer = `mkdir -p /data/wal; i=0; touch /tmp/ready
while true; do dd if=/dev/urandom bs=256k count=1 2>/dev/null >> /data/wal/seg-$((i/32)); i=$((i+1)); sleep 1; done`

type bench struct {
	root, ferry, kubeconfig, password, location, image, busybox, etcd string
	// stwLocation is the stop-the-world migration's: a bucket of its own,
	// so that its copy is whole, as a move without stages is (in the
	// stages' repository it would upload only what they did not).
	stwLocation string
	env         []string
	src, dst    *testenv.Cluster
	size        int64
}

// result is the run's JSON.
type result struct {
	Time                time.Time `json:"time"`
	Commit              string    `json:"commit"`
	CPUs                int       `json:"cpus"`
	Bytes               int64     `json:"bytes"`
	Files               int       `json:"files"`
	StopTheWorldSeconds float64   `json:"stopTheWorldSeconds"`
	// StopTheWorldMigrateSeconds is its ferry migrate's own time (without
	// the scaling of the source's writer around it).
	StopTheWorldMigrateSeconds float64 `json:"stopTheWorldMigrateSeconds"`
	// Preflight is the pre-flight's estimate of that migrate, made just
	// before it, against its actual time.
	Preflight *preflightResult `json:"preflight"`
	// StopTheWorldIncrementalSeconds is the same migration through the
	// stages' location: its backup uploads only what they did not.
	StopTheWorldIncrementalSeconds float64                    `json:"stopTheWorldIncrementalSeconds"`
	CutoverSeconds                 float64                    `json:"cutoverSeconds"`
	PredictedSeconds               float64                    `json:"predictedSeconds"`
	ChangedSinceLastStage          int64                      `json:"changedSinceLastStageBytes"`
	CutoverOverStopTheWorld        float64                    `json:"cutoverOverStopTheWorld"`
	CutoverOverIncremental         float64                    `json:"cutoverOverIncremental"`
	ActualOverPredicted            float64                    `json:"actualOverPredicted"`
	Prediction                     enginemigration.Prediction `json:"prediction"`
	Stages                         []enginemigration.StageRecord
	// Steps are the cutover's actual steps, in seconds.
	Steps       map[string]float64 `json:"steps"`
	LoadAverage string             `json:"loadAverage"`
	// EtcdKeysBeforeCutover is the last key the source's etcd had
	// acknowledged before the cutover; EtcdKeysHeld the keys the target's
	// etcd holds, every one its writer acknowledged.
	EtcdKeysBeforeCutover int `json:"etcdKeysBeforeCutover"`
	EtcdKeysHeld          int `json:"etcdKeysHeld"`
}

func main() {
	size := flag.Int64("size-mib", 2048, "size of the data set, MiB")
	change := flag.Float64("change", 0.01, "share of the data set written between the last stage and the cutover")
	out := flag.String("out", "bench/results/cutover.json", "JSON result, relative to the repository root")
	flag.Parse()
	if err := run(*size<<20, *change, *out); err != nil {
		benchutil.Logf(prog, "error: %v", err)
		os.Exit(1)
	}
}

func run(size int64, change float64, out string) error {
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "ferry-bench-cutover-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b := &bench{root: root, ferry: filepath.Join(root, "bin", "ferry"), kubeconfig: filepath.Join(work, "kubeconfig"), password: filepath.Join(work, "password"), size: size}
	if err := os.WriteFile(b.password, []byte("bench-password\n"), 0o600); err != nil {
		return err
	}
	stop, err := b.start(ctx, work)
	defer stop()
	if err != nil {
		return err
	}
	files, err := b.fixture(ctx)
	if err != nil {
		return err
	}
	res := result{Time: time.Now().UTC(), Commit: benchutil.GitCommit(root), CPUs: runtime.NumCPU(), Bytes: b.size, Files: files}
	for i := 1; i <= 2; i++ {
		if err := b.ferryRun("stage", "st", "--include-namespaces", namespace, "--namespace-mappings", namespace+":staged"); err != nil {
			return err
		}
	}
	if res.Preflight, err = b.preflight(ctx, b.stwLocation, "stw"); err != nil {
		return err
	}
	var timings []report.Timing
	if res.StopTheWorldSeconds, res.StopTheWorldMigrateSeconds, timings, err = b.stopTheWorld(ctx, b.stwLocation, "stw"); err != nil {
		return err
	}
	res.Preflight.SetActual(res.StopTheWorldMigrateSeconds, timings)
	if res.StopTheWorldIncrementalSeconds, _, _, err = b.stopTheWorld(ctx, b.location, "stw-inc"); err != nil {
		return err
	}
	if err := b.ferryRun("stage", "st"); err != nil {
		return err
	}
	res.ChangedSinceLastStage = int64(change * float64(b.size))
	wait := time.Duration(float64(res.ChangedSinceLastStage) / writeRate * float64(time.Second))
	benchutil.Logf(prog, "waiting %s for the writer to change %.1f MiB (%.1f%%)", wait.Round(time.Second), float64(res.ChangedSinceLastStage)/(1<<20), change*100)
	time.Sleep(wait)
	pods, err := kubernetes.NewForConfigOrDie(b.src.Config).CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=writer"})
	if err != nil || len(pods.Items) != 1 {
		return fmt.Errorf("the source's writer pod: %v", err)
	}
	if res.EtcdKeysBeforeCutover, _, err = testenv.EtcdKeys(ctx, b.src.Config, namespace, pods.Items[0].Name, "keys"); err != nil {
		return err
	}
	if err := b.ferryRun("cutover", "st", "--report-dir", filepath.Join(work, "report")); err != nil {
		return err
	}
	if res.EtcdKeysHeld, err = b.etcdKeys(ctx, b.dst, "staged", res.EtcdKeysBeforeCutover); err != nil {
		return err
	}
	benchutil.Logf(prog, "the target's etcd holds all %d keys its writer acknowledged (%d before the cutover)", res.EtcdKeysHeld, res.EtcdKeysBeforeCutover)
	j, err := b.journal(ctx, "st")
	if err != nil {
		return err
	}
	c := j.Cutover
	res.CutoverSeconds, res.PredictedSeconds, res.Prediction, res.Stages = c.Downtime.Seconds(), c.Prediction.Total.Seconds(), c.Prediction, j.Stages
	res.CutoverOverStopTheWorld = res.CutoverSeconds / res.StopTheWorldSeconds
	res.CutoverOverIncremental = res.CutoverSeconds / res.StopTheWorldIncrementalSeconds
	res.ActualOverPredicted = res.CutoverSeconds / res.PredictedSeconds
	res.LoadAverage = loadAvg()
	fmt.Printf("| data set | stop-the-world downtime (own bucket; through the stages' repository) | staged cutover downtime | cutover ÷ stop-the-world (÷ through the stages' repository) | cutover predicted | actual ÷ predicted |\n|---|--:|--:|--:|--:|--:|\n")
	fmt.Printf("| %.0f MiB, %d files; %.1f MiB changed since the last stage | %.1f s (%.1f s) | %.1f s | **%.2f** (%.2f) | %.1f s | **%.2f** |\n",
		float64(b.size)/(1<<20), files, float64(res.ChangedSinceLastStage)/(1<<20), res.StopTheWorldSeconds, res.StopTheWorldIncrementalSeconds,
		res.CutoverSeconds, res.CutoverOverStopTheWorld, res.CutoverOverIncremental, res.PredictedSeconds, res.ActualOverPredicted)
	fmt.Printf("\nprediction: %s\n", c.Prediction)
	res.Preflight.print()
	res.Steps = map[string]float64{
		"quiesce":           c.PodsGone.Sub(c.QuiesceStarted).Seconds(),
		"finalBackup":       c.DeltaDone.Sub(c.PodsGone).Seconds(),
		"restore":           c.Restored.Sub(c.DeltaDone).Seconds(),
		"compareUntilReady": c.Ready.Sub(c.Restored).Seconds(),
	}
	fmt.Printf("actual steps: quiesce %.1f s, final backup %.1f s, restore (delta written, objects created) %.1f s, objects compared until Ready %.1f s\n",
		res.Steps["quiesce"], res.Steps["finalBackup"], res.Steps["restore"], res.Steps["compareUntilReady"])
	return benchutil.WriteJSON(filepath.Join(root, out), res)
}

// ferryRun runs ferry migrate OP NAME between the two clusters; op ""
// runs ferry migrate --name NAME.
func (b *bench) ferryRun(op, name string, extra ...string) error {
	return b.ferryRunAt(b.location, op, name, extra...)
}

// ferryRunAt is ferryRun with the backup storage location loc.
func (b *bench) ferryRunAt(loc, op, name string, extra ...string) error {
	args := []string{"migrate", op, name}
	if op == "" {
		args = []string{"migrate", "--name", name}
	}
	args = append(args, "--kubeconfig", b.kubeconfig, "--from-context", "src", "--to-context", "dst", "--storage", loc,
		"--repository-password-file", b.password, "--insecure", "--helper-image", b.image,
		"--node-pods-dir", filepath.Join(b.src.Node.RootDir, "pods"), "--to-node-pods-dir", filepath.Join(b.dst.Node.RootDir, "pods"))
	args = append(args, extra...)
	start := time.Now()
	cmd := exec.Command(b.ferry, args...)
	cmd.Env = append(os.Environ(), b.env...)
	outb, err := cmd.CombinedOutput()
	benchutil.Logf(prog, "ferry %s: %.1f s\n%s", strings.Join(args[:3], " "), time.Since(start).Seconds(), benchutil.Tail(string(outb), 3000))
	if err != nil {
		return fmt.Errorf("ferry %s: %w", strings.Join(args[:3], " "), err)
	}
	return nil
}

func (b *bench) journal(ctx context.Context, name string) (*enginemigration.Journal, error) {
	creds := map[string]string{}
	for _, kv := range b.env {
		k, v, _ := strings.Cut(kv, "=")
		creds[k] = v
	}
	loc, err := store.Open(ctx, b.location, store.WithCredentials(creds))
	if err != nil {
		return nil, err
	}
	defer loc.Close()
	j, err := enginemigration.LoadJournal(ctx, loc, name)
	if err == nil && (j.Cutover == nil || j.Cutover.Step != enginemigration.CutoverDone) {
		err = errors.New("the cutover did not finish")
	}
	return j, err
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
