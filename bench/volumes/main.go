// Command volumes benchmarks ferry's pod volume backup and restore (the
// kopia library inside pkg/volumes) against the kopia CLI built from the
// same kopia version (v0.22.3), side by side in one run.
//
// What is measured. A mixed data set (default 2 GiB: one 1 GiB disk image,
// 24 files of 24 MiB, and 20,000 small files of 1-40 KiB in 200 folders;
// random, incompressible bytes) is written once. Then, for each round,
// four timed operations run, each as its own child process, on fresh
// repositories:
//
//   - backup, kopia: "kopia snapshot create DATA" into a filesystem
//     repository ("kopia repository create filesystem", not timed);
//   - backup, ferry: this program re-executed in a worker mode that opens
//     a file:// backup storage location and snapshots DATA with
//     pkg/volumes (Repository.Snapshot: the code "ferry backup create
//     --host-pods-dir" and the node agent run per volume);
//   - restore, kopia: "kopia restore SNAPSHOT DIR";
//   - restore, ferry: the worker restores the snapshot with
//     Repository.Restore (staging folder, move into place, directory
//     times, done-marker).
//
// Both sides use the same repository format: AES256-GCM-HMAC-SHA256,
// BLAKE2B-256-128, no compression, and ferry's splitter
// DYNAMIC-1M-BUZHASH (kopia is created with --object-splitter set to it).
// kopia's caches and config live in the run's folder. Times are wall clock
// from process start to exit; peak RSS from getrusage. The ratio is kopia's
// time ÷ ferry's time: above 1.0 ferry is faster (target ≥ 1.0). ferry's
// restore is compared with the data set byte for byte (modes, times).
//
// Run from the repository root:
//
//	go run ./bench/volumes -gib 2 -rounds 1
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
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
	"github.com/kubeferry/ferry/pkg/volumes/volumetest"
)

const (
	password     = "bench repository password"
	kopiaVersion = "v0.22.3"
	prog         = "bench/volumes"
)

func main() {
	worker := flag.String("worker", "", "internal: run one ferry operation (backup|restore)")
	storeURL := flag.String("store", "", "internal: storage location")
	src := flag.String("src", "", "internal: folder to back up")
	dst := flag.String("dst", "", "internal: folder to restore into")
	snap := flag.String("snapshot", "", "internal: snapshot to restore")
	cpuProfile := flag.String("cpuprofile", "", "internal: write the worker's CPU profile here")
	gib := flag.Float64("gib", 2, "size of the data set in GiB")
	rounds := flag.Int("rounds", 1, "rounds (kopia and ferry alternate which goes first)")
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

func runWorker(op, storeURL, src, dst, snap string) error {
	ctx := context.Background()
	loc, err := store.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	defer loc.Close()
	repo, err := volumes.Open(ctx, loc, password, volumes.OpenOptions{Create: op == "backup"})
	if err != nil {
		return err
	}
	defer repo.Close(ctx)
	var res workerResult
	switch op {
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

func run(gib float64, rounds int, work, kopiaBin, out string) error {
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if kopiaBin == "" {
		if kopiaBin, err = installKopia(); err != nil {
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
	data := filepath.Join(work, "data")
	benchutil.Logf(prog, "writing the %.1f GiB data set into %s", gib, data)
	size, files, err := makeDataSet(data, int64(gib*(1<<30)))
	if err != nil {
		return err
	}
	benchutil.Logf(prog, "data set: %d files, %.0f MiB", files, float64(size)/(1<<20))
	var samples []sample
	add := func(tool, op string, round int, wall time.Duration, rss float64) {
		s := sample{Tool: tool, Op: op, Round: round, Secs: wall.Seconds(), MiBps: float64(size) / (1 << 20) / wall.Seconds(), RSSMiB: rss}
		samples = append(samples, s)
		benchutil.Logf(prog, "round %d %s %s: %.1f s, %.0f MiB/s, peak RSS %.0f MiB", round, tool, op, s.Secs, s.MiBps, rss)
	}
	for round := 1; round <= rounds; round++ {
		rd := filepath.Join(work, fmt.Sprintf("r%d", round))
		order := []string{"kopia", "ferry"}
		if round%2 == 0 {
			order = []string{"ferry", "kopia"}
		}
		for _, tool := range order {
			dir := filepath.Join(rd, tool)
			restored := filepath.Join(dir, "restored")
			if err := os.MkdirAll(restored, 0o755); err != nil {
				return err
			}
			switch tool {
			case "ferry":
				loc := "file://" + filepath.Join(dir, "store")
				o, e, wall, rss, code, err := benchutil.Child(ctx, self, "-worker", "backup", "-store", loc, "-src", data)
				if err != nil || code != 0 {
					return fmt.Errorf("ferry backup: %v %s", err, benchutil.Tail(string(e), 500))
				}
				add(tool, "backup", round, wall, rss)
				var res workerResult
				if err := json.Unmarshal(o, &res); err != nil {
					return err
				}
				_, e, wall, rss, code, err = benchutil.Child(ctx, self, "-worker", "restore", "-store", loc, "-snapshot", res.SnapshotID, "-dst", restored)
				if err != nil || code != 0 {
					return fmt.Errorf("ferry restore: %v %s", err, benchutil.Tail(string(e), 500))
				}
				add(tool, "restore", round, wall, rss)
				diffs, err := volumetest.Compare(data, restored, volumes.MarkerDir)
				if err != nil || len(diffs) > 0 {
					return fmt.Errorf("ferry's restore differs from the data set: %v %v", err, diffs)
				}
			case "kopia":
				cfg := []string{"--config-file", filepath.Join(dir, "kopia.config")}
				k := func(args ...string) ([]byte, []byte, time.Duration, float64, error) {
					o, e, wall, rss, code, err := benchutil.Child(ctx, "env", append([]string{"KOPIA_PASSWORD=" + password, "KOPIA_CHECK_FOR_UPDATES=false", kopiaBin}, append(args, cfg...)...)...)
					if err == nil && code != 0 {
						err = fmt.Errorf("exit %d", code)
					}
					if err != nil {
						return nil, nil, 0, 0, fmt.Errorf("kopia %s: %v %s", strings.Join(args, " "), err, benchutil.Tail(string(e), 500))
					}
					return o, e, wall, rss, nil
				}
				if _, _, _, _, err := k("repository", "create", "filesystem", "--path", filepath.Join(dir, "repo"), "--cache-directory", filepath.Join(dir, "cache"), "--object-splitter", volumes.Splitter); err != nil {
					return err
				}
				_, _, wall, rss, err := k("snapshot", "create", data, "--no-progress")
				if err != nil {
					return err
				}
				add(tool, "backup", round, wall, rss)
				o, _, _, _, err := k("snapshot", "list", data, "--json")
				if err != nil {
					return err
				}
				var snaps []struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(o, &snaps); err != nil || len(snaps) == 0 {
					return fmt.Errorf("kopia snapshot list: %v %s", err, benchutil.Tail(string(o), 300))
				}
				if _, _, wall, rss, err = k("restore", snaps[len(snaps)-1].ID, restored, "--no-progress"); err != nil {
					return err
				}
				add(tool, "restore", round, wall, rss)
				// kopia sets directories' times to their newest entry's; files must match.
				diffs, err := volumetest.Compare(data, restored)
				if err != nil {
					return err
				}
				for _, d := range diffs {
					if !strings.Contains(d, "mtime") && !strings.Contains(d, "more") {
						return fmt.Errorf("kopia's restore differs from the data set: %v", diffs)
					}
				}
			}
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
	}
	report(samples, size, files, kopiaBin)
	return benchutil.WriteJSON(filepath.Join(root, out), map[string]any{
		"commit": benchutil.GitCommit(root), "bytes": size, "files": files, "kopia": kopiaVersion, "splitter": volumes.Splitter, "samples": samples,
	})
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

func report(samples []sample, size int64, files int, kopiaBin string) {
	fmt.Printf("Data set: %d files, %.2f GiB; kopia CLI %s (%s); medians of %d rounds\n\n", files, float64(size)/(1<<30), kopiaVersion, kopiaBin, len(samples)/4)
	fmt.Println("| operation | kopia CLI | ferry | ferry / kopia (speed) | kopia peak RSS | ferry peak RSS |")
	fmt.Println("|---|--:|--:|--:|--:|--:|")
	for _, op := range []string{"backup", "restore"} {
		var kt, ft, kr, fr []float64
		for _, s := range samples {
			if s.Op != op {
				continue
			}
			if s.Tool == "kopia" {
				kt, kr = append(kt, s.Secs), append(kr, s.RSSMiB)
			} else {
				ft, fr = append(ft, s.Secs), append(fr, s.RSSMiB)
			}
		}
		k, f := median(kt), median(ft)
		mib := float64(size) / (1 << 20)
		fmt.Printf("| %s | %.1f s (%.0f MiB/s) | %.1f s (%.0f MiB/s) | **%.2f** | %.0f MiB | %.0f MiB |\n", op, k, mib/k, f, mib/f, k/f, median(kr), median(fr))
	}
}

// installKopia builds the kopia CLI of the pinned version into the tools
// cache, once.
func installKopia() (string, error) {
	dir := os.Getenv("FERRY_TOOLS_BIN")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(cache, "ferry", "bin")
	}
	bin := filepath.Join(dir, "kopia")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	benchutil.Logf(prog, "building kopia %s into %s (a few minutes, once)", kopiaVersion, dir)
	// "go install github.com/kopia/kopia@v0.22.3" would do, but the module
	// proxy refuses the version list it reads for deprecation notices; a
	// throw-away module that requires kopia builds the same binary with
	// kopia's own dependency versions.
	mod, err := os.MkdirTemp("", "ferry-kopia-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(mod)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module ferry.local/kopiabuild\n\ngo 1.26\n"), 0o644); err != nil {
		return "", err
	}
	for _, args := range [][]string{{"get", "github.com/kopia/kopia@" + kopiaVersion}, {"build", "-o", bin, "github.com/kopia/kopia"}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = mod
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("building kopia: go %s: %w", strings.Join(args, " "), err)
		}
	}
	return bin, nil
}

// makeDataSet writes the mixed data set of about size bytes into dir: half
// in one disk image, a quarter in 24 medium files, a quarter in small
// files (1-40 KiB) in 200 folders. It returns the bytes and files written.
func makeDataSet(dir string, size int64) (int64, int, error) {
	rng := rand.New(rand.NewPCG(42, 4242))
	var total int64
	files := 0
	buf := make([]byte, 1<<20)
	write := func(p string, n int64) error {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		for left := n; left > 0; {
			c := min(left, int64(len(buf)))
			for i := 0; i+8 <= int(c); i += 8 {
				v := rng.Uint64()
				buf[i], buf[i+1], buf[i+2], buf[i+3], buf[i+4], buf[i+5], buf[i+6], buf[i+7] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
			}
			if _, err := f.Write(buf[:c]); err != nil {
				f.Close()
				return err
			}
			left -= c
		}
		total += n
		files++
		return f.Close()
	}
	if err := write(filepath.Join(dir, "disk", "disk.img"), size/2); err != nil {
		return 0, 0, err
	}
	for i := 0; i < 24; i++ {
		if err := write(filepath.Join(dir, "media", fmt.Sprintf("clip-%02d.bin", i)), size/4/24); err != nil {
			return 0, 0, err
		}
	}
	for i := 0; total < size; i++ {
		if err := write(filepath.Join(dir, "small", fmt.Sprintf("%03d", i%200), fmt.Sprintf("f%06d.dat", i)), int64(1024+rng.IntN(40*1024))); err != nil {
			return 0, 0, err
		}
	}
	return total, files, nil
}
