package helperpod

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/kubeferry/ferry/pkg/volumes"
)

// OpProbe measures the volume data path of a cluster (a pre-flight
// check's estimate): a probe upload, or a probe download of an earlier
// probe's snapshot and the walk a verification makes of it.
const OpProbe = "probe"

// ProbeJob is the work of a probe pod. With SnapshotID empty it writes
// Bytes of random bytes (which no compression or deduplication shrinks)
// into its own emptyDir and snapshots them into the location's volume
// repository, created if missing (the helpers' location is a probe
// prefix of the real one: store.SubURL); with SnapshotID it restores that
// snapshot into its emptyDir as a claim's restore does
// (Repository.RestoreClaim), then walks it as a verification's check does
// (volumes.CheckContent).
//
// With Size it measures instead the bytes of the regular files of the
// job's volume, read as a backup reads it (Helpers.Sizes).
type ProbeJob struct {
	Bytes int64 `json:"bytes,omitempty"`
	// FileSize is the size of each file of the data set (default and at
	// most 8 MiB, at least 4 KiB): the volumes' average, so that the
	// probe pays their per-file cost in proportion to their bytes.
	FileSize   int64  `json:"fileSize,omitempty"`
	SnapshotID string `json:"snapshotID,omitempty"`
	Size       bool   `json:"size,omitempty"`
}

// Bounds of a probe's file size.
const (
	MinProbeFile = 4 << 10
	MaxProbeFile = 8 << 20
)

// ProbeResult is what a probe pod measured: the bytes moved, and the
// seconds the repository took to open, the data to move, and (download)
// the restored data's walk. Took is the pod's whole time, seen from the
// process that ran it (Secret and pod created, scheduled, started, the
// job, its end seen, the pod deleted): Took less the job's own seconds is
// the fixed cost of each helper pod.
type ProbeResult struct {
	SnapshotID string `json:"snapshotID,omitempty"`
	Bytes      int64  `json:"bytes"`
	// Files counts the data set's files (a size job's: the volume's).
	Files       int64   `json:"files,omitempty"`
	OpenSeconds float64 `json:"openSeconds"`
	MoveSeconds float64 `json:"moveSeconds"`
	WalkSeconds float64 `json:"walkSeconds,omitempty"`
	// PrepSeconds is the writing of an upload's data set: the probe's
	// own, no helper's.
	PrepSeconds float64       `json:"prepSeconds,omitempty"`
	Took        time.Duration `json:"-"`
	Node        string        `json:"-"`
}

// Fixed is the part of Took that is not the data's: what every helper
// pod costs however small its volume.
func (r *ProbeResult) Fixed() time.Duration {
	d := r.Took - time.Duration((r.MoveSeconds+r.WalkSeconds+r.PrepSeconds)*float64(time.Second))
	return max(d, 0)
}

// Probe runs one probe pod in namespace ns and returns what it measured.
func (h *Helpers) Probe(ctx context.Context, ns string, job ProbeJob) (*ProbeResult, error) {
	h.defaults()
	var out JobOutcome
	what := "volume data probe upload"
	if job.SnapshotID != "" {
		what = "volume data probe download"
	}
	hr := helperRun{key: what, namespace: ns, job: Job{Op: OpProbe, Probe: &job}}
	res, err := h.run(ctx, hr, &out, func(Progress) {})
	if err != nil {
		return nil, err
	}
	if out.Error != "" {
		return nil, &Error{Target: what, Pod: res.Pod, Node: res.Node, Reason: out.Error}
	}
	if out.Probe == nil {
		return nil, &Error{Target: what, Pod: res.Pod, Node: res.Node, Reason: "the probe pod reported no measurement"}
	}
	out.Probe.Took, out.Probe.Node = res.Took, res.Node
	return out.Probe, nil
}

// Sizes measures the bytes of each volume's regular files, and counts
// them (ProbeResult.Bytes and Files), through a
// helper pod that reads it as its backup would (readRun), h.Parallel at
// a time: what the kubelet reports no statistics of (a hostPath or NFS
// volume). A volume that could not be measured has its error instead.
func (h *Helpers) Sizes(ctx context.Context, vols []volumes.PodVolume) ([]ProbeResult, []error) {
	h.defaults()
	sizes, errs := make([]ProbeResult, len(vols)), make([]error, len(vols))
	modes := h.accessModes(ctx, vols)
	h.each(len(vols), func(i int) {
		hr, err := readRun(vols[i], modes, Job{Op: OpProbe, Volume: vols[i], Probe: &ProbeJob{Size: true}})
		if err != nil {
			errs[i] = err
			return
		}
		var out JobOutcome
		res, err := h.run(ctx, hr, &out, func(Progress) {})
		switch {
		case err != nil:
			errs[i] = err
		case out.Error != "":
			errs[i] = &Error{Target: hr.key, Pod: res.Pod, Node: res.Node, Reason: out.Error}
		case out.Probe == nil:
			errs[i] = &Error{Target: hr.key, Pod: res.Pod, Node: res.Node, Reason: "the helper reported no size"}
		default:
			sizes[i] = *out.Probe
		}
	})
	return sizes, errs
}

// probeJob does a probe job inside its pod.
func probeJob(ctx context.Context, job Job, progress io.Writer) JobOutcome {
	fail := func(err error) JobOutcome { return JobOutcome{Error: cut(err.Error())} }
	pj := job.Probe
	// Progress lines all along: a silent helper is taken as stalled.
	rep := newProgressPrinter(progress)
	defer rep.stop()
	if pj != nil && pj.Size {
		n, files, err := volumeSize(ctx, job, rep.update)
		if err != nil {
			return fail(err)
		}
		return JobOutcome{Probe: &ProbeResult{Bytes: n, Files: files}}
	}
	if pj == nil || (pj.SnapshotID == "" && pj.Bytes <= 0) {
		return fail(errors.New("volume helper: a probe job needs bytes to upload or a snapshot to download"))
	}
	upload := pj.SnapshotID == ""
	dir := filepath.Join(os.TempDir(), "ferry-probe")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	prep := time.Now()
	if upload {
		if err := writeProbeData(dir, pj.Bytes, pj.FileSize); err != nil {
			return fail(err)
		}
	}
	start := time.Now()
	repo, closeRepo, err := openRepository(ctx, upload)
	if err != nil {
		return fail(fmt.Errorf("the probe repository: %w", err))
	}
	defer closeRepo()
	res := &ProbeResult{OpenSeconds: time.Since(start).Seconds(), PrepSeconds: start.Sub(prep).Seconds()}
	if upload {
		s, err := repo.Snapshot(ctx, dir, "probe/upload", nil, rep.update)
		if err != nil {
			return fail(err)
		}
		res.SnapshotID, res.Bytes, res.Files, res.MoveSeconds = s.SnapshotID, s.Bytes, s.Files, time.Duration(s.Duration).Seconds()
		return JobOutcome{Probe: res}
	}
	r, err := repo.RestoreClaim(ctx, pj.SnapshotID, dir, "ferry-probe", volumes.ClaimPolicy{}, rep.update)
	if err != nil {
		return fail(err)
	}
	res.SnapshotID, res.Bytes, res.Files, res.MoveSeconds = pj.SnapshotID, r.Bytes, r.Files, time.Duration(r.Duration).Seconds()
	walk := time.Now()
	if _, err := volumes.CheckContent(ctx, dir, rep.update); err != nil {
		return fail(err)
	}
	res.WalkSeconds = time.Since(walk).Seconds()
	return JobOutcome{Probe: res}
}

// writeProbeData writes n random bytes into dir, in files of size each
// (clamped to MinProbeFile..MaxProbeFile), 256 files to a folder.
func writeProbeData(dir string, n, size int64) error {
	size = min(max(size, MinProbeFile), MaxProbeFile)
	buf := make([]byte, min(size, 1<<20))
	for i := 0; n > 0; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%04d", i/256))
		if i%256 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
		}
		f, err := os.Create(filepath.Join(sub, fmt.Sprintf("probe-%06d", i)))
		if err != nil {
			return err
		}
		for w := int64(0); w < size && n > 0; {
			k := min(int64(len(buf)), n, size-w)
			_, _ = rand.Read(buf[:k])
			if _, err := f.Write(buf[:k]); err != nil {
				f.Close()
				return err
			}
			w, n = w+k, n-k
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// volumeSize sums the sizes of the regular files of a size job's volume,
// and counts them.
func volumeSize(ctx context.Context, job Job, progress volumes.Progress) (n, files int64, err error) {
	dir := MountClaimDir
	if job.PodsDir != "" {
		if dir, err = volumes.HostPath(job.PodsDir, job.Volume.PodUID, job.Volume); err != nil {
			return 0, 0, err
		}
	}
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return nil // gone while walked
			}
			n += info.Size()
			files++
			progress(n, files)
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("volume %s: %w", job.Volume.Key(), err)
	}
	return n, files, nil
}
