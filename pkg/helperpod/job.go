package helperpod

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// EnvJob is the environment variable that holds a volume helper
// pod's job (Job, JSON). The location's URL is in store.EnvStorage,
// the repository password in volumes.EnvPassword and the credentials under the
// keys of the location's scheme (store.CredentialKeys: AWS_ACCESS_KEY_ID,
// AZURE_STORAGE_KEY, GOOGLE_APPLICATION_CREDENTIALS_JSON, ...), all from
// the pod's Secret.
const EnvJob = "FERRY_VOLUME_JOB"

// Where a helper pod mounts what it works on.
const (
	// MountClaimDir is where the claim is mounted.
	MountClaimDir = "/ferry/volume"
	// MountPodsDir is where the node's kubelet pods directory is mounted.
	MountPodsDir = "/ferry/pods"
)

// Operations of a Job.
const (
	OpBackup  = "backup"
	OpRestore = "restore"
	// OpCheck walks a restored claim, read-only, and compares it with the
	// list of entries its restore kept (volumes.CheckContent).
	OpCheck = "check"
)

// Job is the work of one volume helper pod: back up one volume, or
// restore one snapshot. A claim is mounted at MountClaimDir; with PodsDir
// set, the volume is found in the node's kubelet pods directory mounted
// there instead (a volume that is not a claim, or a claim that another pod
// may not mount).
type Job struct {
	Op     string `json:"op"`
	Backup string `json:"backup,omitempty"`
	// Volume is the volume to back up, or (restore) the target's.
	Volume  volumes.PodVolume `json:"volume"`
	PodsDir string            `json:"podsDir,omitempty"`
	// SnapshotID and RestoreUID are the restore's snapshot and done-marker.
	SnapshotID string `json:"snapshotID,omitempty"`
	RestoreUID string `json:"restoreUID,omitempty"`
	Sparse     bool   `json:"sparse,omitempty"`
	// Claim restores into a claim (Repository.RestoreClaim): it is written
	// unless it holds the snapshot's done-marker; with KeepExisting, a
	// claim without that marker is left alone (ErrKeptExisting).
	Claim        bool `json:"claim,omitempty"`
	KeepExisting bool `json:"keepExisting,omitempty"`
	// Probe is a probe job's (OpProbe).
	Probe *ProbeJob `json:"probe,omitempty"`
}

// JobOutcome is what a helper pod reports in its termination message.
type JobOutcome struct {
	Backup  *volumes.PodVolumeBackup  `json:"backup,omitempty"`
	Restore *volumes.PodVolumeRestore `json:"restore,omitempty"`
	Check   *volumes.ContentCheck     `json:"check,omitempty"`
	Probe   *ProbeResult              `json:"probe,omitempty"`
	// Error is why a check or a probe failed.
	Error string `json:"error,omitempty"`
}

// Progress is one line a helper prints on stdout while it works.
type Progress struct {
	Bytes int64 `json:"bytes"`
	Files int64 `json:"files"`
}

// maxMessage keeps a termination message under the kubelet's 4096 bytes.
const maxMessage = 1500

// RunJob does job inside a helper pod: it opens the location and its
// repository from the environment, prints a Progress line to
// progress every second, and returns the outcome (errors in it, per
// volume, as the other paths report them).
func RunJob(ctx context.Context, job Job, progress io.Writer) JobOutcome {
	var out JobOutcome
	fail := func(err error) JobOutcome {
		msg := err.Error()
		if len(msg) > maxMessage {
			msg = msg[:maxMessage] + "..."
		}
		if job.Op == OpBackup {
			out.Backup = &volumes.PodVolumeBackup{PodVolume: job.Volume, Error: msg}
		} else {
			out.Restore = &volumes.PodVolumeRestore{RestoreTarget: volumes.RestoreTarget{PodVolume: job.Volume, SnapshotID: job.SnapshotID}, Error: msg}
		}
		return out
	}
	switch job.Op {
	case OpCheck:
		return checkJob(ctx, job, progress)
	case OpProbe:
		return probeJob(ctx, job, progress)
	}
	if job.Op != OpBackup && job.Op != OpRestore {
		return fail(fmt.Errorf("volume helper: unknown op %q", job.Op))
	}
	repo, closeRepo, err := openRepository(ctx, job.Op == OpBackup)
	if err != nil {
		return fail(fmt.Errorf("volume %s: %w", job.Volume.Key(), err))
	}
	defer closeRepo()
	repo.SparseFiles = job.Sparse
	rep := newProgressPrinter(progress)
	defer rep.stop()
	dir := MountClaimDir
	if job.PodsDir != "" {
		if job.Op == OpRestore {
			dir, err = volumes.WaitHostPath(ctx, job.PodsDir, job.Volume, time.Minute)
		} else {
			dir, err = volumes.HostPath(job.PodsDir, job.Volume.PodUID, job.Volume)
		}
		if err != nil {
			return fail(err)
		}
	}
	if job.Op == OpBackup {
		tags := map[string]string{volumes.TagBackup: job.Backup, "ferry-pod": job.Volume.Namespace + "/" + job.Volume.Pod, "ferry-pod-volume": job.Volume.Volume}
		res, err := repo.Snapshot(ctx, dir, job.Volume.Identity, tags, rep.update)
		if err != nil {
			return fail(fmt.Errorf("volume %s: %w", job.Volume.Key(), err))
		}
		out.Backup = &volumes.PodVolumeBackup{PodVolume: job.Volume, Path: dir, SnapshotResult: res}
		return out
	}
	var res *volumes.RestoreResult
	if job.Claim {
		res, err = repo.RestoreClaim(ctx, job.SnapshotID, dir, job.RestoreUID, volumes.ClaimPolicy{Keep: job.KeepExisting}, rep.update)
	} else {
		res, err = repo.Restore(ctx, job.SnapshotID, dir, job.RestoreUID, rep.update)
	}
	if err != nil {
		return fail(fmt.Errorf("volume %s: %w", job.Volume.Key(), err))
	}
	out.Restore = &volumes.PodVolumeRestore{RestoreTarget: volumes.RestoreTarget{PodVolume: job.Volume, SnapshotID: job.SnapshotID}, Path: dir, RestoreResult: res}
	return out
}

// checkJob walks the claim of a check job (mounted, or found in the
// node's pods directory) and compares it with its restore's list,
// printing its progress as the other jobs do (a silent helper is stalled).
func checkJob(ctx context.Context, job Job, progress io.Writer) JobOutcome {
	dir := MountClaimDir
	if job.PodsDir != "" {
		var err error
		if dir, err = volumes.HostPath(job.PodsDir, job.Volume.PodUID, job.Volume); err != nil {
			return JobOutcome{Error: cut(err.Error())}
		}
	}
	rep := newProgressPrinter(progress)
	c, err := volumes.CheckContent(ctx, dir, rep.update)
	rep.stop()
	if err != nil {
		return JobOutcome{Error: cut(err.Error())}
	}
	// The outcome travels in the termination message (at most 4096 bytes
	// as the kubelet keeps it): paths are dropped until it fits.
	for len(c.Changed) > 0 {
		if b, _ := json.Marshal(JobOutcome{Check: c}); len(b) <= maxMessage*2 {
			break
		}
		n := len(c.Changed) - 1 // one path fewer each time
		if c.Changed[n] == "..." {
			n--
		}
		if n <= 0 {
			c.Changed = nil
			break
		}
		c.Changed = append(c.Changed[:n:n], "...")
	}
	return JobOutcome{Check: c}
}

// cut shortens msg to maxMessage bytes, at a character boundary.
func cut(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	return strings.ToValidUTF8(msg[:maxMessage], "") + "..."
}

// jobCredentials are the credentials of the location at locURL in a
// helper's environment: its scheme's keys (store.CredentialKeys) that are
// set. GOOGLE_APPLICATION_CREDENTIALS_JSON is no variable the Google
// libraries read themselves, so the store is given them explicitly.
func jobCredentials(locURL string) map[string]string {
	u, err := url.Parse(locURL)
	if err != nil {
		return nil
	}
	creds := map[string]string{}
	for _, k := range store.CredentialKeys(u.Scheme) {
		if v := os.Getenv(k); v != "" {
			creds[k] = v
		}
	}
	return creds
}

// progressPrinter prints the latest totals once a second (also when they
// did not change: the line says the helper is alive).
type progressPrinter struct {
	mu    sync.Mutex
	cur   Progress
	w     io.Writer
	quit  chan struct{}
	ended chan struct{}
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	p := &progressPrinter{w: w, quit: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(p.ended)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			p.print()
			select {
			case <-p.quit:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *progressPrinter) update(bytes, files int64) {
	p.mu.Lock()
	p.cur = Progress{Bytes: bytes, Files: files}
	p.mu.Unlock()
}

func (p *progressPrinter) print() {
	p.mu.Lock()
	b, _ := json.Marshal(p.cur)
	p.mu.Unlock()
	if p.w != nil {
		_, _ = p.w.Write(append(b, '\n'))
	}
}

func (p *progressPrinter) stop() {
	close(p.quit)
	<-p.ended
	p.print()
}

// openRepository opens the volume data repository in the backup storage
// location the helper pod's environment names (store.EnvStorage, its
// credentials and password), creating it if create; done closes both.
func openRepository(ctx context.Context, create bool) (repo *volumes.Repository, done func(), err error) {
	locURL := os.Getenv(store.EnvStorage)
	loc, err := store.Open(ctx, locURL, store.WithCredentials(jobCredentials(locURL)))
	if err != nil {
		return nil, nil, err
	}
	pw, err := volumes.ReadPassword("")
	if err == nil {
		repo, err = volumes.Open(ctx, loc, pw, volumes.OpenOptions{Create: create})
	}
	if err != nil {
		loc.Close()
		return nil, nil, err
	}
	return repo, func() { repo.Close(context.WithoutCancel(ctx)); loc.Close() }, nil
}
