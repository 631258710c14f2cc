// Command volumes benchmarks ferry's pod volume backup and restore (the
// kopia library inside pkg/volumes) against the kopia CLI built from the
// same kopia version (v0.22.3), side by side in one run.
//
// What is measured. A mixed data set (default 2 GiB: one 1 GiB disk image,
// 24 files of 24 MiB, and about 25,000 small files of 1-40 KiB in 200
// folders; random, incompressible bytes) is written once. Then, for each
// round, four timed operations run, each as its own child process, on
// fresh repositories that were created, untimed, before the round:
//
//   - backup, kopia: "kopia snapshot create DATA" into a filesystem
//     repository;
//   - backup, ferry: this program re-executed in a worker mode that opens
//     a file:// backup storage location and snapshots DATA with
//     pkg/volumes (Repository.Snapshot: the code "ferry backup create
//     --host-pods-dir" and the node agent run per volume);
//   - restore, kopia: "kopia restore SNAPSHOT DIR";
//   - restore, ferry: the worker restores the snapshot with
//     Repository.Restore (staging folder, move into place, directory
//     times, done-marker).
//
// Both sides do the same work. Same repository format: AES256-GCM-HMAC-SHA256,
// BLAKE2B-256-128, no compression, and ferry's splitter DYNAMIC-1M-BUZHASH
// (kopia is created with --object-splitter set to it). No local caches:
// ferry connects with a zero content cache size, which turns every kopia
// cache off, and kopia's repository is created with
// --content-cache-size-mb=0 --metadata-cache-size-mb=0, which does the same
// (checked in its config file). No maintenance, no logs: every kopia
// command runs with --no-auto-maintenance (checked with "kopia maintenance
// info" after each round), --disable-repository-log,
// --disable-file-logging and --disable-content-log, as ferry's library use
// runs no maintenance and writes no logs. Both repositories are created
// before the timed backups ("kopia repository create filesystem"; ferry's
// worker in an "init" mode). The order alternates by round (kopia first in
// odd rounds), and dirty pages are flushed (sync) before each timed
// operation.
//
// Times are wall clock from process start to exit; peak RSS from
// getrusage. The ratio is kopia's time ÷ ferry's time: above 1.0 ferry is
// faster (target ≥ 1.0). Both restores are compared with the data set in
// the same way, byte for byte with modes and modification times of every
// file and folder (volumetest.Compare), and any difference fails the run.
// The kopia CLI restores a folder's time as the newest time below it
// (kopia's snapshotfs reports DirSummary.MaxModTime); ferry restores each
// folder's own recorded time. So that one strict check fits both, the data
// set's folders carry the newest time below them, where the two agree.
//
// Run from the repository root:
//
//	go run ./bench/volumes -gib 2 -rounds 3
//
// The kopia CLI is built on first use into ~/.cache/ferry/bin/kopia
// (go build of github.com/kopia/kopia v0.22.3 in a throw-away module; a
// few minutes). A Markdown table goes to stdout, progress to stderr, and
// the full result to bench/results/volumes.json.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

const (
	password = "bench repository password"
	prog     = "bench/volumes"
)

func main() {
	worker := flag.String("worker", "", "internal: run one ferry operation (init|backup|restore)")
	storeURL := flag.String("store", "", "internal: storage location")
	src := flag.String("src", "", "internal: folder to back up")
	dst := flag.String("dst", "", "internal: folder to restore into")
	snap := flag.String("snapshot", "", "internal: snapshot to restore")
	cpuProfile := flag.String("cpuprofile", "", "internal: write the worker's CPU profile here")
	gib := flag.Float64("gib", 2, "size of the data set in GiB")
	rounds := flag.Int("rounds", 3, "rounds (kopia and ferry alternate which goes first: kopia in odd rounds)")
	work := flag.String("dir", "", "work folder (default a new folder under $TMPDIR; needs about 5x the data set)")
	kopiaBin := flag.String("kopia", "", "kopia CLI (default ~/.cache/ferry/bin/kopia, installed on first use)")
	out := flag.String("out", "bench/results/volumes.json", "JSON result")
	flag.Parse()
	if *worker != "" {
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err == nil && pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
		if err := runWorker(*worker, *storeURL, *src, *dst, *snap); err != nil {
			pprof.StopCPUProfile()
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *rounds < 1 {
		benchutil.Logf(prog, "error: -rounds must be at least 1")
		os.Exit(2)
	}
	if err := run(*gib, *rounds, *work, *kopiaBin, *out); err != nil {
		benchutil.Logf(prog, "error: %v", err)
		os.Exit(1)
	}
}

// workerResult is what a ferry worker prints.
type workerResult struct {
	SnapshotID string `json:"snapshotID"`
	Bytes      int64  `json:"bytes"`
	Files      int64  `json:"files"`
}

// runWorker runs one ferry operation: init creates the repository (untimed
// by the caller), backup and restore open the existing one.
func runWorker(op, storeURL, src, dst, snap string) error {
	ctx := context.Background()
	loc, err := store.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	defer loc.Close()
	repo, err := volumes.Open(ctx, loc, password, volumes.OpenOptions{Create: op == "init"})
	if err != nil {
		return err
	}
	defer repo.Close(ctx)
	var res workerResult
	switch op {
	case "init":
	case "backup":
		r, err := repo.Snapshot(ctx, src, "pvc/bench/data", map[string]string{volumes.TagBackup: "bench"}, nil)
		if err != nil {
			return err
		}
		res = workerResult{SnapshotID: r.SnapshotID, Bytes: r.Bytes, Files: r.Files}
	case "restore":
		r, err := repo.Restore(ctx, snap, dst, "bench", nil)
		if err != nil {
			return err
		}
		res = workerResult{SnapshotID: snap, Bytes: r.Bytes, Files: r.Files}
	default:
		return fmt.Errorf("unknown worker %q", op)
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// sample is one timed child process.
type sample struct {
	Tool   string  `json:"tool"`
	Op     string  `json:"op"`
	Round  int     `json:"round"`
	Secs   float64 `json:"seconds"`
	MiBps  float64 `json:"mibPerSecond"`
	RSSMiB float64 `json:"peakRSSMiB"`
}

// bench is one run's setup: the data set, the programs, the samples.
type bench struct {
	data, self string
	size       int64
	samples    []sample
}

// timed flushes dirty pages (so that an operation does not pay for the
// previous one's writes), runs one child process and records it as a
// sample. A failure or a non-zero exit is an error naming what.
func (b *bench) timed(ctx context.Context, tool, op string, round int, name string, args ...string) ([]byte, error) {
	syscall.Sync()
	o, e, wall, rss, code, err := benchutil.Child(ctx, name, args...)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d", code)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v %s", tool, op, err, benchutil.Tail(string(e), 500))
	}
	s := sample{Tool: tool, Op: op, Round: round, Secs: wall.Seconds(), MiBps: float64(b.size) / (1 << 20) / wall.Seconds(), RSSMiB: rss}
	b.samples = append(b.samples, s)
	benchutil.Logf(prog, "round %d %s %s: %.1f s, %.0f MiB/s, peak RSS %.0f MiB", round, tool, op, s.Secs, s.MiBps, rss)
	return o, nil
}

func run(gib float64, rounds int, work, kopiaBin, out string) error {
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if kopiaBin == "" {
		if kopiaBin, err = benchutil.InstallKopia(prog); err != nil {
			return err
		}
	}
	if work == "" {
		if work, err = os.MkdirTemp("", "ferry-bench-volumes-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b := &bench{data: filepath.Join(work, "data"), self: self}
	benchutil.Logf(prog, "writing the %.1f GiB data set into %s", gib, b.data)
	size, files, err := benchutil.MakeDataSet(b.data, int64(gib*(1<<30)))
	if err != nil {
		return err
	}
	b.size = size
	benchutil.Logf(prog, "data set: %d files, %.0f MiB", files, float64(size)/(1<<20))
	for round := 1; round <= rounds; round++ {
		order := []string{"kopia", "ferry"}
		if round%2 == 0 {
			order = []string{"ferry", "kopia"}
		}
		dirs := map[string]string{}
		for _, tool := range order {
			dirs[tool] = filepath.Join(work, fmt.Sprintf("r%d", round), tool)
		}
		// Both repositories exist before either tool's timed backup.
		k := benchutil.KopiaCLI{Bin: kopiaBin, Config: filepath.Join(dirs["kopia"], "kopia.config"), Password: password}
		if err := k.Create(ctx, "filesystem", "--path", filepath.Join(dirs["kopia"], "repo")); err != nil {
			return err
		}
		ferryLoc := "file://" + filepath.Join(dirs["ferry"], "store")
		if err := b.ferryInit(ctx, ferryLoc); err != nil {
			return err
		}
		for _, tool := range order {
			restored := filepath.Join(dirs[tool], "restored")
			if err := os.MkdirAll(restored, 0o755); err != nil {
				return err
			}
			if tool == "ferry" {
				err = b.ferryRound(ctx, round, ferryLoc, restored)
			} else {
				err = b.kopiaRound(ctx, round, k, restored)
			}
			if err != nil {
				return err
			}
			if err := benchutil.CheckRestore(tool, b.data, restored); err != nil {
				return err
			}
			if err := os.RemoveAll(dirs[tool]); err != nil {
				return err
			}
		}
	}
	report(b.samples, size, files, kopiaBin)
	return benchutil.WriteJSON(filepath.Join(root, out), map[string]any{
		"commit": benchutil.GitCommit(root), "bytes": size, "files": files, "kopia": benchutil.KopiaVersion, "splitter": volumes.Splitter, "samples": b.samples,
	})
}

// ferryInit creates ferry's repository in loc, untimed.
func (b *bench) ferryInit(ctx context.Context, loc string) error {
	if err := os.MkdirAll(strings.TrimPrefix(loc, "file://"), 0o755); err != nil {
		return err
	}
	_, e, _, _, code, err := benchutil.Child(ctx, b.self, "-worker", "init", "-store", loc)
	if err != nil || code != 0 {
		return fmt.Errorf("ferry init: %v (exit %d) %s", err, code, benchutil.Tail(string(e), 500))
	}
	return nil
}

// ferryRound times ferry's backup of the data set into loc and its restore
// into restored.
func (b *bench) ferryRound(ctx context.Context, round int, loc, restored string) error {
	o, err := b.timed(ctx, "ferry", "backup", round, b.self, "-worker", "backup", "-store", loc, "-src", b.data)
	if err != nil {
		return err
	}
	var res workerResult
	if err := json.Unmarshal(o, &res); err != nil {
		return fmt.Errorf("ferry backup printed %q: %w", benchutil.Tail(string(o), 300), err)
	}
	_, err = b.timed(ctx, "ferry", "restore", round, b.self, "-worker", "restore", "-store", loc, "-snapshot", res.SnapshotID, "-dst", restored)
	return err
}

// kopiaRound times the kopia CLI's backup of the data set into k's
// repository and its restore into restored.
func (b *bench) kopiaRound(ctx context.Context, round int, k benchutil.KopiaCLI, restored string) error {
	if _, err := b.timed(ctx, "kopia", "backup", round, "env", k.Args("snapshot", "create", b.data, "--no-progress")...); err != nil {
		return err
	}
	id, err := k.LatestSnapshot(ctx, b.data)
	if err != nil {
		return err
	}
	if _, err = b.timed(ctx, "kopia", "restore", round, "env", k.Args("restore", id, restored, "--no-progress")...); err != nil {
		return err
	}
	return k.NoMaintenance(ctx)
}

// report prints the medians and, per round, the ratio kopia ÷ ferry.
func report(samples []sample, size int64, files int, kopiaBin string) {
	rounds := len(samples) / 4
	fmt.Printf("Data set: %d files, %.2f GiB; kopia CLI %s (%s); medians of %d rounds\n\n", files, float64(size)/(1<<30), benchutil.KopiaVersion, kopiaBin, rounds)
	fmt.Println("| operation | kopia CLI | ferry | ferry / kopia (speed) | kopia peak RSS | ferry peak RSS |")
	fmt.Println("|---|--:|--:|--:|--:|--:|")
	perRound := map[string][]string{}
	for _, op := range []string{"backup", "restore"} {
		secs := map[string]map[int]float64{"kopia": {}, "ferry": {}}
		var kt, ft, kr, fr []float64
		for _, s := range samples {
			if s.Op != op {
				continue
			}
			secs[s.Tool][s.Round] = s.Secs
			if s.Tool == "kopia" {
				kt, kr = append(kt, s.Secs), append(kr, s.RSSMiB)
			} else {
				ft, fr = append(ft, s.Secs), append(fr, s.RSSMiB)
			}
		}
		for r := 1; r <= rounds; r++ {
			perRound[op] = append(perRound[op], fmt.Sprintf("%.2f", secs["kopia"][r]/secs["ferry"][r]))
		}
		k, f := benchutil.Median(kt), benchutil.Median(ft)
		mib := float64(size) / (1 << 20)
		fmt.Printf("| %s | %.1f s (%.0f MiB/s) | %.1f s (%.0f MiB/s) | **%.2f** | %.0f MiB | %.0f MiB |\n", op, k, mib/k, f, mib/f, k/f, benchutil.Median(kr), benchutil.Median(fr))
	}
	fmt.Printf("\nPer round, kopia's time ÷ ferry's (kopia first in odd rounds): backup %s; restore %s\n",
		strings.Join(perRound["backup"], ", "), strings.Join(perRound["restore"], ", "))
}
