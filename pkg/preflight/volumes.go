package preflight

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// VolumeProbe is how the estimate measures the volume data's path: a
// probe pod in the source uploads a data set of Bytes through the
// location, and one in the target downloads it and walks it, as the
// move's helper pods do with the claims (helperpod.ProbeJob). What they
// write goes under store.ProbeDir/<id>/ in the location, and is deleted
// when the check ends.
type VolumeProbe struct {
	// URL is the backup storage location the volume data goes through.
	URL string
	// Source and Target are the helper pods' settings in each cluster.
	Source, Target helperpod.Settings
	// Bytes is the probe's data set (default DefaultProbeBytes).
	Bytes int64
}

// probeStart bounds the start of each probe pod (scheduling, mount,
// ferry's image pulled): a check waits no longer than that for one.
const probeStart = 3 * time.Minute

// maxProbeFiles bounds the probe's files (a volume of tiny files makes a
// smaller data set).
const maxProbeFiles = 16384

// DefaultProbeBytes is the probe's data set: enough that the data's
// time, not the repository's opening, is what is measured.
const DefaultProbeBytes = 128 << 20

// volumeLoad is the volume data a move carries.
type volumeLoad struct {
	volumes int
	bytes   int64
	// files counts the files of the volumes whose files were counted,
	// which hold countedBytes: their average file size is the probe's.
	files, countedBytes int64
	// measured counts the volumes whose used bytes the source's kubelet
	// reported (or the stored backup recorded); the others are counted
	// at their claim's size, an upper bound.
	measured int
	// sourceNS is a namespace of the volumes in the source, where the
	// upload probe runs (under the same PodSecurity as the helpers);
	// targetNS the target namespace it maps to.
	sourceNS, targetNS string
}

// volumeTimes are the volume data's parts of the move's steps.
type volumeTimes struct {
	backup, restore, verify                float64
	backupBasis, restoreBasis, verifyBasis string
	load                                   *volumeLoad
}

// estimateVolumes is the volume data's time in the move's backup, restore
// and verification: each step's helper pods, Parallel at a time (as
// helperpod.Helpers run them), each paying the probe pod's fixed cost
// (pod start, repository open, end), and the bytes at the probe's rate:
// the upload's for the backup, the download's for the restore, the walk's
// for the verification's check of each restored claim. Nil when no
// volume data moves, or it could not be measured (then Skipped says why).
func (e *env) estimateVolumes(ctx context.Context, src *source) *volumeTimes {
	if !e.o.VolumeData {
		return nil
	}
	load, err := e.volumeLoad(ctx, src)
	if err != nil {
		e.skip("the volume data's time: %v", err)
		return nil
	}
	if load.volumes == 0 {
		return nil
	}
	vp := e.o.VolumeProbe
	if vp == nil {
		e.skip("the volume data's time (%d volume(s), %s): no probe of the location's throughput was asked for", load.volumes, mib(load.bytes))
		return nil
	}
	up, down, err := e.probeVolumes(ctx, vp, load, src.memory)
	if err != nil {
		e.skip("the volume data's time (%d volume(s), %s): the throughput probe failed: %v", load.volumes, mib(load.bytes), err)
		return nil
	}
	parallel := min(4, load.volumes) // helperpod.Helpers' default
	rounds := float64((load.volumes + parallel - 1) / parallel)
	what := fmt.Sprintf("volume data: %d volume(s), %s", load.volumes, mib(load.bytes))
	if load.files > 0 {
		what += fmt.Sprintf(" (%d files counted, %s on average)", load.files, size(load.fileSize()))
	}
	if n := load.volumes - load.measured; n > 0 {
		what += fmt.Sprintf(" (%d of them at their claim's size, as their used bytes could not be measured: an upper bound)", n)
	}
	what += fmt.Sprintf(", %d helper pod(s) at a time", parallel)
	vt := &volumeTimes{load: load}
	fixedDown := down.Fixed().Seconds()
	downRate, walkRate := rate(down.Bytes, down.MoveSeconds), rate(down.Bytes, down.WalkSeconds)
	vt.restore = rounds*fixedDown + float64(load.bytes)/downRate
	vt.restoreBasis = fmt.Sprintf("%s, each %.1f s to start and end and the data at %s/s (a probe pod downloaded %s in %d files from the location in target node %s)",
		what, fixedDown, mib(int64(downRate)), mib(down.Bytes), down.Files, down.Node)
	fixedCheck := max(fixedDown-down.OpenSeconds, 0)
	vt.verify = rounds*fixedCheck + float64(load.bytes)/walkRate
	vt.verifyBasis = fmt.Sprintf("%s checking the restored claims, each %.1f s to start and end and the data walked at %s/s (the probe pod's walk of what it downloaded)",
		what, fixedCheck, mib(int64(walkRate)))
	if up != nil {
		fixedUp, upRate := up.Fixed().Seconds(), rate(up.Bytes, up.MoveSeconds)
		vt.backup = rounds*fixedUp + float64(load.bytes)/upRate
		vt.backupBasis = fmt.Sprintf("%s, each %.1f s to start and end and the data at %s/s (a probe pod uploaded %s of random bytes in %d files to the location from source node %s; the claims' disks are taken to read as fast)",
			what, fixedUp, mib(int64(upRate)), mib(up.Bytes), up.Files, up.Node)
	}
	return vt
}

// size is n bytes in KiB, or in MiB from 1 MiB on.
func size(n int64) string {
	if n >= 1<<20 {
		return mib(n)
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

// rate is bytes per second, never zero.
func rate(bytes int64, seconds float64) float64 {
	return max(float64(bytes), 1) / max(seconds, 0.001)
}

// volumeLoad finds the volumes whose data moves and their bytes: a
// stored backup's from its record; a live source's as the backup would
// choose them (volumes.Select over the pods of the namespaces that
// move, and their unmounted claims), each at the used bytes its node's
// kubelet reports (the volume's statistics: a CSI driver's
// NodeGetVolumeStats), else as a sizing helper pod measures them, else
// at its claim's size.
func (e *env) volumeLoad(ctx context.Context, src *source) (*volumeLoad, error) {
	mapNS := func(ns string) string {
		if m := e.o.Restore.Spec.NamespaceMapping[ns]; m != "" {
			return m
		}
		return ns
	}
	load := &volumeLoad{}
	if e.o.Source == nil {
		var rec volumes.BackupRecord
		key := store.BackupVolumesKey(src.backup)
		if ok, err := src.loc.Exists(ctx, key); err == nil && !ok {
			return load, nil // a backup without volume data has no record
		}
		if err := src.loc.GetJSON(ctx, key, &rec); err != nil {
			return nil, fmt.Errorf("the backup's volume record: %w", err)
		}
		for _, v := range rec.Volumes {
			if v.Error == "" && v.SnapshotResult != nil {
				load.add(v.PodVolume, mapNS(v.Namespace), v.Bytes, v.Files, true)
			}
		}
		return load, nil
	}
	vols, claims, err := e.sourceVolumes(ctx, mapNS)
	if err != nil {
		return nil, err
	}
	used := usedBytes(ctx, e.o.Source, vols)
	var unknown []volumes.PodVolume
	for _, v := range vols {
		if u, ok := used[v.Namespace+"/"+v.ClaimName]; ok && v.ClaimName != "" {
			load.add(v, mapNS(v.Namespace), u.Bytes, u.Files, true)
			continue
		}
		unknown = append(unknown, v)
	}
	sizes, errs := e.measureSizes(ctx, unknown)
	for i, v := range unknown {
		if errs[i] == nil {
			load.add(v, mapNS(v.Namespace), sizes[i].Bytes, sizes[i].Files, true)
			continue
		}
		e.o.Log.Warn("a volume's used bytes could not be measured: its claim's size is counted", "volume", v.Key(), "error", errs[i])
		load.add(v, mapNS(v.Namespace), claimSize(claims[v.Namespace+"/"+v.ClaimName]), 0, false)
	}
	return load, nil
}

// measureSizes measures the volumes' used bytes through sizing helper
// pods in the source (helperpod.Helpers.Sizes), when the probe may run
// pods; without, every volume has an error.
func (e *env) measureSizes(ctx context.Context, vols []volumes.PodVolume) ([]helperpod.ProbeResult, []error) {
	sizes, errs := make([]helperpod.ProbeResult, len(vols)), make([]error, len(vols))
	vp := e.o.VolumeProbe
	if len(vols) == 0 {
		return sizes, errs
	}
	if vp == nil {
		for i := range errs {
			errs[i] = fmt.Errorf("no probe pods were allowed")
		}
		return sizes, errs
	}
	h, err := helperpod.New(ctx, vp.URL, e.o.Source, vp.Source)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return sizes, errs
	}
	defer h.Run.Close(ctx)
	if h.StartTimeout <= 0 || h.StartTimeout > probeStart {
		h.StartTimeout = probeStart
	}
	return h.Sizes(ctx, vols)
}

// add counts volume v (in targetNS in the target) at bytes; measured
// says they are its used bytes, files > 0 counts its files.
func (l *volumeLoad) add(v volumes.PodVolume, targetNS string, bytes, files int64, measured bool) {
	if l.volumes == 0 {
		l.sourceNS, l.targetNS = v.Namespace, targetNS
	}
	l.volumes++
	l.bytes += bytes
	if measured {
		l.measured++
	}
	if files > 0 {
		l.files += files
		l.countedBytes += bytes
	}
}

// fileSize is the volumes' average file size (0: unknown).
func (l *volumeLoad) fileSize() int64 {
	if l.files == 0 {
		return 0
	}
	return l.countedBytes / l.files
}

// claimSize is a claim's capacity, or its request while it has none.
func claimSize(c *corev1.PersistentVolumeClaim) int64 {
	if c == nil {
		return 0
	}
	if q, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
		return q.Value()
	}
	q := c.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.Value()
}

// sourceVolumes are the volumes a live source's backup would move, and
// the claims of their namespaces by "namespace/name".
func (e *env) sourceVolumes(ctx context.Context, mapNS func(string) string) ([]volumes.PodVolume, map[string]*corev1.PersistentVolumeClaim, error) {
	var namespaces []string
	planned := map[string]bool{}
	for ns := range e.c.namespaces {
		planned[ns] = true
	}
	l, err := e.o.Source.Typed.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the source's namespaces: %w", err)
	}
	for _, n := range l.Items {
		if planned[mapNS(n.Name)] {
			namespaces = append(namespaces, n.Name)
		}
	}
	sort.Strings(namespaces)
	var pods []corev1.Pod
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for _, ns := range namespaces {
		pl, err := e.o.Source.Typed.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("listing the pods of source namespace %s: %w", ns, err)
		}
		pods = append(pods, pl.Items...)
		cl, err := e.o.Source.Typed.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("listing the claims of source namespace %s: %w", ns, err)
		}
		for i := range cl.Items {
			claims[ns+"/"+cl.Items[i].Name] = &cl.Items[i]
		}
	}
	defaultToFS := e.o.Backup.Spec.DefaultVolumesToFsBackup
	vols, _ := volumes.Select(pods, defaultToFS, true)
	mounted := map[string]bool{}
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				mounted[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName] = true
			}
		}
	}
	var keep []volumes.PodVolume
	for _, v := range vols {
		// A claim bound to no volume holds no data (the backup skips it).
		if c := claims[v.Namespace+"/"+v.ClaimName]; v.ClaimName == "" || (c != nil && c.Spec.VolumeName != "") {
			keep = append(keep, v)
		}
	}
	for key, c := range claims {
		if defaultToFS && !mounted[key] && c.Status.Phase == corev1.ClaimBound {
			keep = append(keep, volumes.PodVolume{Namespace: c.Namespace, Volume: c.Name, ClaimName: c.Name, Identity: "pvc/" + key})
		}
	}
	sort.Slice(keep, func(i, j int) bool { return keep[i].Identity < keep[j].Identity })
	return keep, claims, nil
}

// usedBytes are the used bytes (and inodes, as files) of the claims
// mounted on the volumes' nodes, by "namespace/claim", as each node's
// kubelet reports them
// (/stats/summary through the API server's node proxy). A node that does
// not answer, or a volume it has no statistics of (a hostPath volume),
// is left out.
func usedBytes(ctx context.Context, c *kube.Cluster, vols []volumes.PodVolume) map[string]helperpod.ProbeResult {
	nodes := map[string]bool{}
	for _, v := range vols {
		if v.Node != "" {
			nodes[v.Node] = true
		}
	}
	out := map[string]helperpod.ProbeResult{}
	for node := range nodes {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		raw, err := c.Typed.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "stats", "summary").DoRaw(ctx)
		cancel()
		if err != nil {
			continue
		}
		var s statsv1alpha1.Summary
		if json.Unmarshal(raw, &s) != nil {
			continue
		}
		for _, p := range s.Pods {
			for _, v := range p.VolumeStats {
				if v.PVCRef != nil && v.UsedBytes != nil {
					u := helperpod.ProbeResult{Bytes: int64(*v.UsedBytes)}
					if v.InodesUsed != nil {
						u.Files = int64(*v.InodesUsed) // files and folders: near enough
					}
					out[v.PVCRef.Namespace+"/"+v.PVCRef.Name] = u
				}
			}
		}
	}
	return out
}

// probeVolumes runs the probes: an upload from the source (a live one;
// a stored backup's data is uploaded already) or, without one, from the
// target, and a download into the target; what they wrote is deleted
// from the location before it returns. up is nil for a stored backup.
// Nothing is written until the helper pods' environment is known good
// (a location they can reach); then the location is opened here, and
// probes that killed checks left (older than staleProbe) are swept.
func (e *env) probeVolumes(ctx context.Context, vp *VolumeProbe, load *volumeLoad, live bool) (up, down *helperpod.ProbeResult, err error) {
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	prefix := store.ProbeDir + hex.EncodeToString(id) + "/"
	url, err := store.SubURL(vp.URL, prefix)
	if err != nil {
		return nil, nil, err
	}
	targetNS := load.targetNS
	if _, ok := e.t.namespaces[targetNS]; !ok {
		targetNS = metav1.NamespaceDefault // the move has not created it yet
	}
	upCluster, upSettings, upNS := e.o.Target, vp.Target, targetNS
	if live {
		upCluster, upSettings, upNS = e.o.Source, vp.Source, load.sourceNS
	}
	upH, err := probeHelpers(ctx, url, upCluster, upSettings)
	if err != nil {
		return nil, nil, err
	}
	defer upH.Run.Close(ctx)
	downH, err := probeHelpers(ctx, url, e.o.Target, vp.Target)
	if err != nil {
		return nil, nil, err
	}
	defer downH.Run.Close(ctx)
	loc, err := store.Open(ctx, vp.URL, store.WithCredentials(locationCredentials(vp.URL, upH.Env)))
	if err != nil {
		return nil, nil, err
	}
	defer loc.Close()
	if err := e.checkRepository(ctx, loc, upSettings.Password, live); err != nil {
		return nil, nil, err
	}
	if n, err := loc.SweepProbes(ctx, staleProbe); err != nil {
		e.o.Log.Warn("the probes of killed pre-flight checks were not swept", "error", err)
	} else if n > 0 {
		e.o.Log.Info("swept the probes of killed pre-flight checks", "objects", n)
	}
	defer e.removeProbe(ctx, loc, prefix)
	bytes := vp.Bytes
	if bytes <= 0 {
		bytes = DefaultProbeBytes
	}
	job := helperpod.ProbeJob{Bytes: bytes, FileSize: helperpod.MaxProbeFile}
	if fs := load.fileSize(); fs > 0 {
		// The volumes' average file size, so that the probe pays their
		// per-file cost in proportion; at most maxProbeFiles files.
		job.FileSize = min(max(fs, helperpod.MinProbeFile), helperpod.MaxProbeFile)
		job.Bytes = min(bytes, maxProbeFiles*job.FileSize)
	}
	u, err := upH.Probe(ctx, upNS, job)
	if err != nil {
		return nil, nil, fmt.Errorf("upload in %s, namespace %s: %w", upCluster.Name, upNS, err)
	}
	d, err := downH.Probe(ctx, targetNS, helperpod.ProbeJob{SnapshotID: u.SnapshotID})
	if err != nil {
		return nil, nil, fmt.Errorf("download in %s, namespace %s: %w", e.o.Target.Name, targetNS, err)
	}
	if live {
		up = u
	}
	return up, d, nil
}

// checkRepository opens the location's volume repository with the
// password the move's helper pods get, as the move's first helper would:
// a password that does not open it is a blocker (no volume's data would
// move), and so is a missing repository when a stored backup's data is to
// be restored from it; a live move creates it. The returned error stops
// the probe (its estimate would be of a move that cannot happen).
func (e *env) checkRepository(ctx context.Context, loc *store.Location, password string, live bool) error {
	repo, err := volumes.Open(ctx, loc, password, volumes.OpenOptions{Log: e.o.Log})
	switch {
	case err == nil:
		return repo.Close(context.WithoutCancel(ctx))
	case errors.Is(err, volumes.ErrNoRepository) && live:
		return nil // the move's backup creates it
	case errors.Is(err, volumes.ErrWrongPassword), errors.Is(err, volumes.ErrNoPassword), errors.Is(err, volumes.ErrNoRepository):
		e.add(report.Blocker, "volume-data", nil, fmt.Sprintf("no volume's data can move: %v", err),
			"give the password the location's volume repository was created with")
		return fmt.Errorf("the volume repository: %w", err)
	}
	return fmt.Errorf("opening the volume repository: %w", err)
}

// locationCredentials are the credentials of the location at url among
// the helper pods' environment env.
func locationCredentials(url string, env map[string]string) map[string]string {
	scheme, _, _ := strings.Cut(url, "://")
	out := map[string]string{}
	for _, k := range store.CredentialKeys(scheme) {
		if v := env[k]; v != "" {
			out[k] = v
		}
	}
	return out
}

// staleProbe is how old a probe's objects are before a later check
// deletes them (a check that was killed left them).
const staleProbe = time.Hour

// probeHelpers are the helper pods of cluster for the probe location at
// url, each given at most probeStart to start; an error means the pods
// could not reach the location (a file:// one), and nothing was written.
func probeHelpers(ctx context.Context, url string, cluster *kube.Cluster, s helperpod.Settings) (*helperpod.Helpers, error) {
	h, err := helperpod.New(ctx, url, cluster, s)
	if err != nil {
		return nil, err
	}
	if h.StartTimeout <= 0 || h.StartTimeout > probeStart {
		h.StartTimeout = probeStart
	}
	return h, nil
}

// removeProbe deletes what the probes wrote under prefix.
func (e *env) removeProbe(ctx context.Context, loc *store.Location, prefix string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := loc.DeleteUnder(ctx, prefix); err != nil {
		e.o.Log.Warn("the volume probe's objects were not all deleted from the location", "prefix", prefix, "error", err)
		e.skip("cleaning up: the volume probe's objects under %s in %s were not all deleted (a later pre-flight deletes them after an hour): %v", prefix, loc.URL(), err)
	}
}
