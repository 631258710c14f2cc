package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/retention"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// volumeFlags are the flags of pod volume data (file-system backup with kopia).
type volumeFlags struct {
	hostPodsDir   string
	passwordFile  string
	defaultToFS   bool
	helperImage   string
	wait          time.Duration
	byNodeAgent   bool
	sparse        bool
	nodePodsDir   string
	toNodePodsDir string
	unschedulable time.Duration
	// active are the helper pods of this command (helpers), whose
	// claims get progress lines (showVolumes).
	active []*helperpod.Helpers
}

// showVolumes gives each claim the helper pods move a line of dp.
func (f *volumeFlags) showVolumes(dp *dataProgress) {
	for _, h := range f.active {
		h.OnVolume = dp.volume
	}
}

// registerHelpers adds the flags of the helper pods that move volume data
// when nothing of ferry is installed in the cluster.
func (f *volumeFlags) registerHelpers(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.helperImage, "helper-image", defaultImage(), "ferry's image, run by the helper pods that move volume data and by the ferry-restore-wait init container; the only image a target needs to pull. The default is not published yet: build and push one from a clone with 'make image IMAGE=REGISTRY/ferry:TAG' (IMAGE_INSECURE=1 for a registry without TLS), to a registry both clusters' nodes can pull from, and pass it here")
	fl.StringVar(&f.helperImage, "restore-helper-image", defaultImage(), "")
	_ = fl.MarkDeprecated("restore-helper-image", "use --helper-image")
	fl.StringVar(&f.nodePodsDir, "node-pods-dir", helperpod.DefaultNodePodsDir, "the kubelet's pods directory on the nodes, which helper pods mount to reach volumes that are not claims (an opted-in emptyDir)")
	fl.DurationVar(&f.wait, "volume-timeout", 10*time.Minute, "how long each helper pod may take to start (scheduling, claim binding and mount, image pull), and how long to wait for each restored pod, before that volume fails; also how long a post-restore hook waits for its container when it sets no wait-timeout")
	fl.DurationVar(&f.unschedulable, "helper-unschedulable-timeout", 30*time.Second, "how long the scheduler may find no node for a helper pod before its volume fails, naming the scheduler's reason")
}

// defaultImage is ferry's image at this build's version.
func defaultImage() string { return "ghcr.io/kubeferry/ferry:" + imageTag() }

// settings are the helper pods' settings of these flags, with password.
func (f *volumeFlags) settings(password string, log *slog.Logger) helperpod.Settings {
	return helperpod.Settings{Image: f.helperImage, Password: password, NodePodsDir: f.nodePodsDir,
		StartTimeout: f.wait, Unschedulable: f.unschedulable, Sparse: f.sparse, Log: log}
}

// track keeps h (when set) among this command's helpers, whose claims get
// progress lines (showVolumes).
func (f *volumeFlags) track(h *helperpod.Helpers) {
	if h != nil {
		f.active = append(f.active, h)
	}
}

func (f *volumeFlags) registerPassword(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.passwordFile, "repository-password-file", "", "file holding the password of the location's volume repository (kopia; default $"+volumes.EnvPassword+"); never printed")
}

func (f *volumeFlags) registerHostPodsDir(cmd *cobra.Command, verb string) {
	cmd.Flags().StringVar(&f.hostPodsDir, "host-pods-dir", "", "the kubelet's pods directory on this machine (/var/lib/kubelet/pods on a node): "+verb+" pod volume data there, at <dir>/<pod UID>/volumes/<plugin>/<volume>")
}

func (f *volumeFlags) registerBackup(cmd *cobra.Command) {
	f.registerHostPodsDir(cmd, "back up")
	f.registerVolumes(cmd)
}

// registerMigrate adds the volume flags of ferry migrate: helper pods in
// both clusters.
func (f *volumeFlags) registerMigrate(cmd *cobra.Command) {
	f.registerVolumes(cmd)
	f.registerSparse(cmd)
	cmd.Flags().StringVar(&f.toNodePodsDir, "to-node-pods-dir", "", "the kubelet's pods directory on the target's nodes (default --node-pods-dir)")
}

func (f *volumeFlags) registerVolumes(cmd *cobra.Command) {
	f.registerPassword(cmd)
	f.registerHelpers(cmd)
	cmd.Flags().BoolVar(&f.defaultToFS, "default-volumes-to-fs-backup", false, "back up the data of every pod volume (except those in a pod's "+v1alpha1.AnnotationExcludeVolumes+" annotation, and hostPath, secret, configMap, projected, downwardAPI, image and unnamed emptyDir volumes); without it, only the volumes named in a pod's "+v1alpha1.AnnotationBackupVolumes+" annotation")
}

func (f *volumeFlags) registerSparse(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.sparse, "write-sparse-files", false, "restore files sparsely: blocks of zeros become holes (slower; kopia's option of the same name)")
}

func (f *volumeFlags) registerRestore(cmd *cobra.Command) {
	f.registerHostPodsDir(cmd, "restore")
	f.registerPassword(cmd)
	f.registerSparse(cmd)
	f.registerHelpers(cmd)
	cmd.Flags().BoolVar(&f.byNodeAgent, "volumes-by-node-agent", false, "leave the volume data to ferry node-agent on each node: the restored pods wait for it in their ferry-restore-wait init container (no --host-pods-dir or password needed here)")
}

// complete checks, when every pod volume's data is to go through helper
// pods, that the repository password can be read (its file, or the
// environment).
func (f *volumeFlags) complete() error {
	if f.defaultToFS && f.hostPodsDir == "" {
		if _, err := readPassword(f.passwordFile); err != nil {
			return fmt.Errorf("--default-volumes-to-fs-backup: %w", err)
		}
	}
	return nil
}

// validate refuses two ways of restoring the data at once.
func (f *volumeFlags) validate() error {
	if f.byNodeAgent && f.hostPodsDir != "" {
		return errors.New("--volumes-by-node-agent and --host-pods-dir: give one (the node agents, or this process, restore the data)")
	}
	return nil
}

// openRepository opens the location's volume repository (creating it when
// create is set).
func (f *volumeFlags) openRepository(ctx context.Context, loc *store.Location, create bool) (*volumes.Repository, error) {
	pw, err := readPassword(f.passwordFile)
	if err != nil {
		return nil, err
	}
	r, err := volumes.Open(ctx, loc, pw, volumes.OpenOptions{Create: create})
	if err != nil {
		return nil, err
	}
	r.SparseFiles = f.sparse
	return r, nil
}

// backupOptions returns the pod volume options of a backup: on this node
// with --host-pods-dir, or else through helper pods in cluster. close
// releases the repository and removes the helper pods.
func (f *volumeFlags) backupOptions(ctx context.Context, loc *store.Location, cluster *kube.Cluster, log *slog.Logger) (*backup.PodVolumeOptions, func(), error) {
	pw, pwErr := readPassword(f.passwordFile)
	if f.hostPodsDir == "" && errors.Is(pwErr, volumes.ErrNoPassword) {
		// No volume data was asked for by flag; a pod that asks for it by
		// annotation gets that volume failed, with the reason.
		return &backup.PodVolumeOptions{Backup: helperpod.FailVolumes(pwErr)}, func() {}, nil
	}
	if pwErr != nil {
		return nil, nil, pwErr
	}
	if f.hostPodsDir != "" {
		repo, err := volumes.Open(ctx, loc, pw, volumes.OpenOptions{Create: true})
		if err != nil {
			return nil, nil, err
		}
		return &backup.PodVolumeOptions{Repository: repo, HostPodsDir: f.hostPodsDir}, func() { repo.Close(context.WithoutCancel(ctx)) }, nil
	}
	opts, h, closeAll, err := helperpod.BackupOptions(ctx, loc, cluster, f.settings(pw, log))
	f.track(h)
	return opts, closeAll, err
}

// restoreOptions is backupOptions for a restore: the node agents, this
// node (--host-pods-dir), or else helper pods, which fill each claim
// before its workloads are created.
func (f *volumeFlags) restoreOptions(ctx context.Context, loc *store.Location, cluster *kube.Cluster, log *slog.Logger) (*restore.PodVolumeOptions, func(), error) {
	if f.byNodeAgent {
		return &restore.PodVolumeOptions{ByNodeAgent: true, HelperImage: f.helperImage}, func() {}, nil
	}
	pw, err := readPassword(f.passwordFile)
	if errors.Is(err, volumes.ErrNoPassword) && f.hostPodsDir == "" {
		return nil, func() {}, nil // the restore says the data is not restored
	}
	if err != nil {
		return nil, nil, err
	}
	if f.hostPodsDir != "" {
		repo, err := f.openRepository(ctx, loc, false)
		if err != nil {
			return nil, nil, err
		}
		return &restore.PodVolumeOptions{Repository: repo, HostPodsDir: f.hostPodsDir, HelperImage: f.helperImage, Wait: f.wait},
			func() { repo.Close(context.WithoutCancel(ctx)) }, nil
	}
	opts, h, closeAll, err := helperpod.RestoreOptions(ctx, loc, cluster, f.settings(pw, log))
	f.track(h)
	return opts, closeAll, err
}

// deleteBackup deletes backup name and then the kopia snapshots of every
// backup no longer in the location (this one, and any an interrupted
// delete left), and runs the repository's maintenance, which removes the
// data no remaining snapshot uses (pkg/retention). A backup with volume
// data needs the repository password; without it nothing is deleted.
func (f *volumeFlags) deleteBackup(ctx context.Context, loc *store.Location, name string) (*retention.Result, error) {
	res, err := retention.Delete(ctx, loc, retention.Request{Name: name, Strict: true,
		Repository: func(ctx context.Context) (*volumes.Repository, error) { return f.openRepository(ctx, loc, false) }})
	if err != nil {
		return nil, err
	}
	if res.Folder == retention.FolderGone && res.Snapshots == 0 {
		return nil, fmt.Errorf("backup %q in %s: %w", name, loc.URL(), store.ErrNotFound)
	}
	return res, nil
}

// volumeVerify is the verification of one pod volume's snapshot.
type volumeVerify struct {
	Volume string `json:"volume"`
	*volumes.VerifyResult
}

// verifyVolumes reads back every snapshot of backup name (kopia snapshot
// verify, every file), and returns what opening the repository found
// damaged in its indexes (nil if nothing). A backup without volume data
// gives nil.
func (f *volumeFlags) verifyVolumes(ctx context.Context, loc *store.Location, name string) ([]volumeVerify, *volumes.Damage, error) {
	rec, err := volumes.LoadBackupRecord(ctx, loc, name)
	if err != nil || rec == nil || rec.Snapshots() == 0 {
		return nil, nil, err
	}
	repo, err := f.openRepository(ctx, loc, false)
	if err != nil {
		return nil, nil, fmt.Errorf("backup %s holds pod volume data: %w", name, err)
	}
	defer repo.Close(context.WithoutCancel(ctx))
	var out []volumeVerify
	for _, v := range rec.Volumes {
		if v.Error != "" || v.SnapshotResult == nil {
			continue
		}
		res, err := repo.Verify(ctx, v.SnapshotID)
		if err != nil {
			res = &volumes.VerifyResult{SnapshotID: v.SnapshotID, Errors: []string{err.Error()}}
		}
		out = append(out, volumeVerify{Volume: v.Key(), VerifyResult: res})
	}
	return out, repo.Damage(), nil
}

// printDamage prints what opening the volume repository found damaged
// in its indexes and what it recovered.
func printDamage(w io.Writer, d *volumes.Damage) {
	if d == nil {
		return
	}
	for _, b := range d.Indexes {
		fmt.Fprintf(w, "Volume repository index blob %s is damaged (%s): left out\n", b.Blob, b.Reason)
	}
	fmt.Fprintf(w, "Volume repository index recovered from %d pack blobs (%d contents)\n", d.RecoveredPacks, d.RecoveredContents)
	for _, b := range d.Unrecovered {
		fmt.Fprintf(w, "Volume repository pack blob %s could not be recovered (%s): the snapshots using its data are damaged\n", b.Blob, b.Reason)
	}
}

// printPodVolumes prints a pod volume summary line.
func printPodVolumes(w io.Writer, s *v1alpha1.PodVolumeSummary, verb string) {
	if s == nil {
		return
	}
	if s.Deferred > 0 {
		fmt.Fprintf(w, "Pod volumes: %d left to the node agents (ferry node-agent): the pods wait for them\n", s.Deferred)
		return
	}
	fmt.Fprintf(w, "Pod volumes: %d of %d %s (%d failed, %d skipped), %d files, %s", s.Completed, s.Total, verb, s.Failed, s.Skipped, s.Files, humanBytes(s.Bytes))
	if s.UploadedBytes > 0 {
		fmt.Fprintf(w, ", %s uploaded", humanBytes(s.UploadedBytes))
	}
	fmt.Fprintln(w)
}

// printVolumeRecord lists a backup's claims and pod volumes: the helper
// pod and node that read each, its snapshot, size and duration, any error.
func printVolumeRecord(w io.Writer, rec *volumes.BackupRecord) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VOLUME\tPOD\tHELPER POD\tNODE\tSNAPSHOT\tFILES\tSIZE\tUPLOADED\tTOOK\tERROR")
	for _, v := range rec.Volumes {
		node := v.HelperNode
		if node == "" {
			node = v.Node
		}
		lead := fmt.Sprintf("%s\t%s/%s\t%s\t%s", volumeName(v.PodVolume), v.Namespace, v.Pod, dash(v.HelperPod), dash(node))
		if v.SnapshotResult == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t%s\n", lead, v.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t-\n", lead, v.SnapshotID, v.Files, humanBytes(v.Bytes), humanBytes(v.UploadedBytes), time.Duration(v.Duration).Round(time.Millisecond))
	}
	for _, s := range rec.Skipped {
		fmt.Fprintf(tw, "pod volume %s/%s/%s\t%s/%s\t-\t-\tskipped\t-\t-\t-\t-\t%s\n", s.Namespace, s.Pod, s.Volume, s.Namespace, s.Pod, s.Reason)
	}
	_ = tw.Flush()
}

// printRestoreVolumes lists a restore's claims and pod volumes: the helper
// pod and node that wrote each, its size, how long it took, any error.
func printRestoreVolumes(w io.Writer, recs []volumes.PodVolumeRestore) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VOLUME\tHELPER POD\tNODE\tFILES\tSIZE\tTOOK\tERROR")
	for _, r := range recs {
		name := volumeName(r.PodVolume)
		pod, node := dash(r.HelperPod), dash(r.HelperNode)
		if r.RestoreResult == nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t%s\n", name, pod, node, dash(r.Error))
			continue
		}
		if r.AlreadyRestored {
			// Written by an earlier run (one that was interrupted, say).
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t%s\n", name, pod, node, "held this backup's data already (done-marker of restore "+r.MarkedBy+"): not written again")
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", name, pod, node, r.Files, humanBytes(r.Bytes), time.Duration(r.Duration).Round(time.Millisecond), dash(r.Error))
	}
	_ = tw.Flush()
}

// volumeName names a volume for people: by its claim when it has one.
func volumeName(v volumes.PodVolume) string {
	if v.ClaimName != "" {
		return "claim " + v.Namespace + "/" + v.ClaimName
	}
	return "pod volume " + v.Key()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// restoreVolumeRecords reads a restore's volume records; nil when it has none.
func restoreVolumeRecords(ctx context.Context, loc *store.Location, name string) ([]volumes.PodVolumeRestore, error) {
	var recs []volumes.PodVolumeRestore
	err := loc.GetJSON(ctx, store.RestoreVolumesKey(name), &recs)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return recs, err
}

// printMigratedVolumes prints the bytes and files of each claim a migrate
// moved (nothing when it moved no volume data), from the restore's volume
// records recs, or why they were not read.
func printMigratedVolumes(w io.Writer, name string, recs []volumes.PodVolumeRestore, err error) {
	if err != nil {
		fmt.Fprintf(w, "Volume records of restore %s not read: %v\n", name, err)
		return
	}
	if len(recs) > 0 {
		fmt.Fprintln(w, "Volumes:")
		printRestoreVolumes(w, recs)
	}
}

// readPassword reads the volume repository password from
// --repository-password-file, or else $FERRY_REPOSITORY_PASSWORD
// (volumes.ReadPassword); a file that cannot be read is named by its flag.
func readPassword(file string) (string, error) {
	pw, err := volumes.ReadPassword(file)
	var pe *fs.PathError
	switch {
	case err == nil || file == "":
		return pw, err
	case errors.As(err, &pe):
		return "", fmt.Errorf("--repository-password-file %s: %w", file, pe.Err)
	default:
		return "", fmt.Errorf("--repository-password-file: %w", err)
	}
}
