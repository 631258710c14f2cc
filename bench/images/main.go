// Command images benchmarks `ferry image sync` against `skopeo sync`
// (Debian package skopeo) copying the same images between the same two
// kinds of local registry, side by side in one run.
//
// What is measured. A source docker-registry (Debian package
// docker-registry, internal/testenv.StartRegistry) gets -images images
// (default 20), each of -layers layers (default 3) of random data between
// -min and -max MiB (default 5 and 20) as gzip-compressed tar layers; the
// first layer of every image comes from a pool of -shared layers (default
// 4), so some layers are shared between images as base layers are. Then,
// for each round, each tool copies every image (tag "1") into a fresh,
// empty target registry started for that run, as its own child process:
//
//   - ferry: "ferry image sync --config CFG" with one entry per repository;
//   - skopeo: "skopeo sync --src yaml --dest docker CFG TARGET" with the
//     same repositories and tag (--src-tls-verify=false and
//     --dest-tls-verify=false: the registries speak plain HTTP), and a
//     registries.d that sets use-sigstore-attachments, so it copies the
//     .sig tags (it has no way to copy the .att: skopeo#1994).
//
// Time is the child's wall-clock time (start to exit); throughput is the
// bytes of the distinct blobs of the image set divided by it. After each
// run every image's digest at the target is checked against the source,
// and so is its signature's (ferry's referrers are on, as by default).
// The tools alternate which goes first every round; the report gives the
// median of each and the ratio ferry ÷ skopeo of the throughputs (> 1:
// ferry is faster). The target is ≥ 1.5 with the images signed.
//
// Run from the repository root (about 3 minutes on 2 cores):
//
//	go run ./bench/images -rounds 3
//
// A Markdown table goes to stdout, progress to stderr, and every sample to
// bench/results/images.json.
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
	"github.com/kubeferry/ferry/internal/testenv"
)

type options struct {
	images, layers, shared, rounds int
	minMiB, maxMiB                 int
	concurrency                    int
	ferry, out                     string
	signed, attest                 bool
	ferryArgs                      string
}

// Sample is one timed run of one tool.
type Sample struct {
	Tool    string  `json:"tool"`
	Round   int     `json:"round"`
	Seconds float64 `json:"seconds"`
	MiBps   float64 `json:"mibPerSecond"`
	RSSMiB  float64 `json:"peakRSSMiB"`
	// SignaturesRewritten counts the .sig tags whose manifest arrived
	// under another digest.
	SignaturesRewritten int `json:"signaturesRewritten"`
	// CPUSeconds is the tool's processor time (user and system), and
	// RegistryCPUSeconds the two registries' during its run: all of it
	// on the same cores.
	CPUSeconds         float64 `json:"cpuSeconds"`
	RegistryCPUSeconds float64 `json:"registryCPUSeconds"`
}

// Result is the whole benchmark.
type Result struct {
	Commit        string    `json:"commit"`
	Images        int       `json:"images"`
	LayersPerImg  int       `json:"layersPerImage"`
	DistinctBlobs int       `json:"distinctBlobs"`
	BlobMiB       float64   `json:"blobMiB"`
	Samples       []Sample  `json:"samples"`
	FerryMedian   float64   `json:"ferryMedianSeconds"`
	SkopeoMedian  float64   `json:"skopeoMedianSeconds"`
	Ratio         float64   `json:"ratio"`
	Signed        bool      `json:"signed"`
	RoundRatios   []float64 `json:"roundRatios"`
	SkopeoVersion string    `json:"skopeoVersion"`
}

const prog = "bench/images"

func main() {
	var o options
	flag.IntVar(&o.images, "images", 20, "number of images")
	flag.IntVar(&o.layers, "layers", 3, "layers per image")
	flag.IntVar(&o.shared, "shared", 4, "pool of shared first layers")
	flag.IntVar(&o.minMiB, "min", 5, "smallest layer, MiB of random data")
	flag.IntVar(&o.maxMiB, "max", 20, "largest layer, MiB of random data")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds (ferry and skopeo alternate)")
	flag.IntVar(&o.concurrency, "concurrency", 4, "ferry --concurrency")
	flag.StringVar(&o.ferry, "ferry", "", "ferry binary (default: build ./cmd/ferry)")
	flag.StringVar(&o.out, "out", "", "JSON result file (default <repo>/bench/results/images.json)")
	flag.BoolVar(&o.signed, "signed", true, "sign every image (a cosign .sig tag), which both tools copy (skopeo with use-sigstore-attachments)")
	flag.BoolVar(&o.attest, "attest", false, "with -signed, attest every image too (a cosign .att tag), which only ferry copies")
	flag.StringVar(&o.ferryArgs, "ferry-args", "", "more flags for ferry image sync, space-separated (e.g. \"--image-jobs 8\")")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		benchutil.Logf(prog, "error: %v", err)
		os.Exit(1)
	}
}

// layerOpener streams a tar holding one file of size random bytes from seed.
func layerOpener(seed int64, size int64) tarball.Opener {
	return func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("data-%d", seed), Size: size, Mode: 0o644, Typeflag: tar.TypeReg})
			if err == nil {
				_, err = io.CopyN(tw, rand.New(rand.NewSource(seed)), size)
			}
			if err == nil {
				err = tw.Close()
			}
			pw.CloseWithError(err)
		}()
		return pr, nil
	}
}

func run(ctx context.Context, o options) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "bench", "results", "images.json")
	}
	if _, err := testenv.RegistryBinary(); err != nil {
		return err
	}
	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		if _, ierr := testenv.ToolsBinDirFresh(); ierr != nil {
			return fmt.Errorf("skopeo: %w", ierr)
		}
		if skopeo, err = exec.LookPath("skopeo"); err != nil {
			return fmt.Errorf("skopeo not installed (hack/install-tools.sh): %w", err)
		}
	}
	ver, _ := exec.Command(skopeo, "--version").Output()
	if o.ferry == "" {
		dir, err := os.MkdirTemp("", "ferry-bench-images-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.ferry = filepath.Join(dir, "ferry")
		build := exec.Command("go", "build", "-o", o.ferry, "./cmd/ferry")
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building ferry: %w", err)
		}
	}
	set, err := pushImageSet(ctx, o)
	if set != nil {
		defer set.src.Stop()
	}
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "ferry-bench-images-cfg-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res := Result{Commit: benchutil.GitCommit(root), Images: o.images, LayersPerImg: o.layers, DistinctBlobs: set.blobs, BlobMiB: set.mib, SkopeoVersion: strings.TrimSpace(string(ver)), Signed: o.signed}
	// skopeo copies cosign's signatures (the .sig tags) when its
	// registries.d configuration says use-sigstore-attachments.
	regsD := filepath.Join(dir, "registries.d")
	if err := os.MkdirAll(regsD, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(regsD, "default.yaml"), []byte("default-docker:\n  use-sigstore-attachments: true\n"), 0o644); err != nil {
		return err
	}
	b := &bench{o: o, set: set, skopeo: skopeo, regsD: regsD, dir: dir}
	var ferryT, skopeoT []float64
	for round := 1; round <= o.rounds; round++ {
		order := []string{"ferry", "skopeo"}
		if round%2 == 0 {
			order = []string{"skopeo", "ferry"}
		}
		var f, s float64
		for _, tool := range order {
			smp, err := b.runTool(ctx, tool, round)
			if err != nil {
				return err
			}
			res.Samples = append(res.Samples, smp)
			if tool == "ferry" {
				f = smp.Seconds
				ferryT = append(ferryT, f)
			} else {
				s = smp.Seconds
				skopeoT = append(skopeoT, s)
			}
		}
		res.RoundRatios = append(res.RoundRatios, s/f)
	}
	res.FerryMedian, res.SkopeoMedian = median(ferryT), median(skopeoT)
	res.Ratio = res.SkopeoMedian / res.FerryMedian
	if err := benchutil.WriteJSON(o.out, res); err != nil {
		return err
	}
	printReport(o, res, set)
	return nil
}

// imageSet is the source registry and the images pushed to it.
type imageSet struct {
	src           *testenv.Registry
	repos         []string
	digests, sigs map[string]v1.Hash // by repository: the image's, its .sig's
	blobs         int                // distinct blobs
	mib           float64            // their MiB
}

// pushImageSet starts the source registry and pushes o.images images
// (signed with o.signed, attested with o.attest) to it.
func pushImageSet(ctx context.Context, o options) (*imageSet, error) {
	src, err := testenv.StartRegistry(ctx, nil, testenv.RegistryOptions{})
	if err != nil {
		return nil, err
	}
	set := &imageSet{src: src, digests: map[string]v1.Hash{}, sigs: map[string]v1.Hash{}}
	benchutil.Logf(prog, "pushing %d images of %d layers (%d-%d MiB, %d shared) to %s", o.images, o.layers, o.minMiB, o.maxMiB, o.shared, src.Host)
	rng := rand.New(rand.NewSource(1))
	size := func() int64 { return int64(o.minMiB+rng.Intn(o.maxMiB-o.minMiB+1)) << 20 }
	var pool []v1.Layer
	for i := 0; i < o.shared; i++ {
		l, err := tarball.LayerFromOpener(layerOpener(int64(1000+i), size()), tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return set, err
		}
		pool = append(pool, l)
	}
	blobs := map[v1.Hash]int64{}
	signer, err := testenv.NewSigner()
	if err != nil {
		return set, err
	}
	for i := 0; i < o.images; i++ {
		ls := []v1.Layer{pool[i%len(pool)]}
		for j := 1; j < o.layers; j++ {
			l, err := tarball.LayerFromOpener(layerOpener(int64(i*100+j), size()), tarball.WithCompressionLevel(gzip.BestSpeed))
			if err != nil {
				return set, err
			}
			ls = append(ls, l)
		}
		img, err := mutate.AppendLayers(empty.Image, ls...)
		if err != nil {
			return set, err
		}
		img, err = mutate.ConfigFile(img, &v1.ConfigFile{Architecture: "amd64", OS: "linux", RootFS: mustRootFS(img)})
		if err != nil {
			return set, err
		}
		repo := fmt.Sprintf("bench/img%02d", i)
		ref, _ := name.ParseReference(src.Host + "/" + repo + ":1")
		if err := remote.Write(ref, img); err != nil {
			return set, fmt.Errorf("pushing %s: %w", ref, err)
		}
		d, _ := img.Digest()
		set.digests[repo] = d
		set.repos = append(set.repos, repo)
		if o.signed {
			if set.sigs[repo], err = src.SignCosign(repo, d, signer); err != nil {
				return set, err
			}
			if o.attest {
				if _, err := src.AttestCosign(repo, d, signer); err != nil {
					return set, err
				}
			}
		}
		m, _ := img.Manifest()
		blobs[m.Config.Digest] = m.Config.Size
		for _, l := range m.Layers {
			blobs[l.Digest] = l.Size
		}
	}
	var total int64
	for _, s := range blobs {
		total += s
	}
	mib := float64(total) / (1 << 20)
	benchutil.Logf(prog, "%d distinct blobs, %.0f MiB", len(blobs), mib)
	set.blobs, set.mib = len(blobs), mib
	return set, nil
}

// bench runs the tools against a fresh target each.
type bench struct {
	o                  options
	set                *imageSet
	skopeo, regsD, dir string
}

// runTool copies the image set with tool into a fresh target registry
// and checks every image (and signature) there.
func (bn *bench) runTool(ctx context.Context, tool string, round int) (Sample, error) {
	o, src, repos, mib := bn.o, bn.set.src, bn.set.repos, bn.set.mib
	dst, err := testenv.StartRegistry(ctx, nil, testenv.RegistryOptions{})
	if err != nil {
		return Sample{}, err
	}
	defer dst.Stop()
	cfg := filepath.Join(bn.dir, tool+".yaml")
	var b strings.Builder
	var args []string
	bin := o.ferry
	if tool == "ferry" {
		b.WriteString("images:\n")
		for _, r := range repos {
			fmt.Fprintf(&b, "  %s/%s:1: %s/%s\n", src.Host, r, dst.Host, r)
		}
		args = append([]string{"image", "sync", "--config", cfg, "--concurrency", fmt.Sprint(o.concurrency), "-o", "json"}, strings.Fields(o.ferryArgs)...)
	} else {
		fmt.Fprintf(&b, "%s:\n  tls-verify: false\n  images:\n", src.Host)
		for _, r := range repos {
			fmt.Fprintf(&b, "    %s: [\"1\"]\n", r)
		}
		bin = bn.skopeo
		args = []string{"--registries.d", bn.regsD, "sync", "--src", "yaml", "--dest", "docker", "--dest-tls-verify=false", cfg, dst.Host + "/bench"}
	}
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return Sample{}, err
	}
	srcCPU := src.CPU()
	u, err := benchutil.ChildUsage(ctx, bin, args...)
	stdout, stderr, wall, rss, code := u.Stdout, u.Stderr, u.Wall, u.RSSMiB, u.Code
	regCPU := src.CPU() - srcCPU + dst.CPU()
	if err != nil || code != 0 {
		return Sample{}, fmt.Errorf("%s: exit %d: %v\n%s\n%s", tool, code, err, benchutil.Tail(string(stdout), 2000), benchutil.Tail(string(stderr), 2000))
	}
	changed, err := bn.checkTarget(tool, dst)
	if err != nil {
		return Sample{}, err
	}
	s := Sample{Tool: tool, Round: round, Seconds: wall.Seconds(), MiBps: mib / wall.Seconds(), RSSMiB: rss, SignaturesRewritten: changed,
		CPUSeconds: u.CPU.Seconds(), RegistryCPUSeconds: regCPU.Seconds()}
	benchutil.Logf(prog, "round %d %-6s %6.2fs %6.1f MiB/s, peak RSS %.0f MiB, CPU %.2fs (registries %.2fs)", round, tool, s.Seconds, s.MiBps, rss, s.CPUSeconds, s.RegistryCPUSeconds)
	return s, nil
}

// checkTarget checks that every image of the set is at dst by its
// digest, and its signature; it counts the signatures dst has under
// another digest (skopeo rewrites them; ferry must not).
func (bn *bench) checkTarget(tool string, dst *testenv.Registry) (changed int, err error) {
	digests, sigs := bn.set.digests, bn.set.sigs
	for _, r := range bn.set.repos {
		got, ok := dst.Digest(r + ":1")
		if !ok || got != digests[r] {
			return 0, fmt.Errorf("%s: %s at the target is %v (present %v), want %v", tool, r, got, ok, digests[r])
		}
		if !bn.o.signed {
			continue
		}
		// skopeo rewrites a signature's manifest (its digest changes; the
		// signed payload and its signature are kept): it is counted, and
		// ferry must keep the bytes.
		sig := r + ":" + testenv.CosignTag(digests[r], "sig")
		got, ok = dst.Digest(sig)
		switch {
		case !ok:
			return 0, fmt.Errorf("%s: the signature %s is not at the target", tool, sig)
		case got != sigs[r] && tool == "ferry":
			return 0, fmt.Errorf("%s: the signature %s at the target is %v, want %v", tool, sig, got, sigs[r])
		case got != sigs[r]:
			changed++
		}
	}
	return changed, nil
}

func printReport(o options, res Result, set *imageSet) {
	var ferryRSS, skopeoRSS []float64
	for _, s := range res.Samples {
		if s.Tool == "ferry" {
			ferryRSS = append(ferryRSS, s.RSSMiB)
		} else {
			skopeoRSS = append(skopeoRSS, s.RSSMiB)
		}
	}
	signed := ""
	if o.signed {
		signed = ", each signed (a cosign .sig; skopeo with use-sigstore-attachments)"
	}
	if o.signed && o.attest {
		signed = ", each signed and attested (cosign .sig and .att; skopeo copies the .sig only)"
	}
	fmt.Printf("%d images x %d layers%s, %d distinct blobs, %.0f MiB; %d rounds, medians (%s)\n\n", o.images, o.layers, signed, set.blobs, set.mib, o.rounds, res.SkopeoVersion)
	fmt.Println("| tool | wall time | MiB/s | peak RSS |")
	fmt.Println("|---|--:|--:|--:|")
	fmt.Printf("| `skopeo sync` | %.2f s | %.1f | %.0f MiB |\n", res.SkopeoMedian, set.mib/res.SkopeoMedian, median(skopeoRSS))
	fmt.Printf("| `ferry image sync` | %.2f s | %.1f | %.0f MiB |\n", res.FerryMedian, set.mib/res.FerryMedian, median(ferryRSS))
	fmt.Printf("\nferry / skopeo = **%.2f** (per round: %s)\n", res.Ratio, fmtRatios(res.RoundRatios))
	for _, s := range res.Samples {
		if s.Tool == "skopeo" && s.SignaturesRewritten > 0 {
			fmt.Printf("\nskopeo wrote %d of the %d signature manifests under another digest (the signed payload kept); ferry kept every digest.\n", s.SignaturesRewritten, o.images)
			break
		}
	}
}

func mustRootFS(img v1.Image) v1.RootFS {
	cf, err := img.ConfigFile()
	if err != nil {
		panic(errors.New("config of a fresh image: " + err.Error()))
	}
	return cf.RootFS
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtRatios(rs []float64) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%.2f", r))
	}
	return strings.Join(parts, ", ")
}
