package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// volumeFlags are the flags of pod volume data (file-system backup with kopia).
type volumeFlags struct {
	hostPodsDir  string
	passwordFile string
	defaultToFS  bool
	helperImage  string
	wait         time.Duration
	byNodeAgent  bool
	sparse       bool
}

func (f *volumeFlags) registerPassword(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.passwordFile, "repository-password-file", "", "file holding the password of the location's volume repository (kopia; default $"+volumes.EnvPassword+"); never printed")
}

func (f *volumeFlags) registerHostPodsDir(cmd *cobra.Command, verb string) {
	cmd.Flags().StringVar(&f.hostPodsDir, "host-pods-dir", "", "the kubelet's pods directory on this machine (/var/lib/kubelet/pods on a node): "+verb+" pod volume data there, at <dir>/<pod UID>/volumes/<plugin>/<volume>")
}

func (f *volumeFlags) registerBackup(cmd *cobra.Command) {
	f.registerHostPodsDir(cmd, "back up")
	f.registerPassword(cmd)
	cmd.Flags().BoolVar(&f.defaultToFS, "default-volumes-to-fs-backup", false, "back up the data of every pod volume (except those in a pod's "+volumes.AnnotationExcludeVolumes+" annotation, and hostPath, secret, configMap, projected, downwardAPI, image and unnamed emptyDir volumes); without it, only the volumes named in a pod's "+volumes.AnnotationBackupVolumes+" annotation")
}

func (f *volumeFlags) registerSparse(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.sparse, "write-sparse-files", false, "restore files sparsely: blocks of zeros become holes (slower; kopia's option of the same name)")
}

func (f *volumeFlags) registerRestore(cmd *cobra.Command) {
	f.registerHostPodsDir(cmd, "restore")
	f.registerPassword(cmd)
	f.registerSparse(cmd)
	cmd.Flags().StringVar(&f.helperImage, "restore-helper-image", restore.DefaultRestoreHelperImage, "image of the ferry-restore-wait init container added to restored pods whose volume data is restored (needs /bin/sh)")
	cmd.Flags().DurationVar(&f.wait, "volume-timeout", 10*time.Minute, "how long to wait for each restored pod, claim binding and volume directory before that volume fails")
	cmd.Flags().BoolVar(&f.byNodeAgent, "volumes-by-node-agent", false, "leave the volume data to `ferry node-agent` on each node: the restored pods wait for it in their ferry-restore-wait init container (no --host-pods-dir or password needed here)")
}

func (f *volumeFlags) validate() error {
	if f.defaultToFS && f.hostPodsDir == "" {
		return errors.New("--default-volumes-to-fs-backup needs --host-pods-dir: the volume data is read from the kubelet's pods directory")
	}
	return nil
}

// openRepository opens the location's volume repository (creating it when
// create is set).
func (f *volumeFlags) openRepository(ctx context.Context, loc *store.Location, create bool) (*volumes.Repository, error) {
	pw, err := volumes.ReadPassword(f.passwordFile)
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

// backupOptions returns the pod volume options of a backup, or nil when
// --host-pods-dir is not given. close releases the repository.
func (f *volumeFlags) backupOptions(ctx context.Context, loc *store.Location) (*backup.PodVolumeOptions, func(), error) {
	if f.hostPodsDir == "" {
		return nil, func() {}, nil
	}
	repo, err := f.openRepository(ctx, loc, true)
	if err != nil {
		return nil, nil, err
	}
	return &backup.PodVolumeOptions{Repository: repo, HostPodsDir: f.hostPodsDir},
		func() { repo.Close(context.WithoutCancel(ctx)) }, nil
}

// restoreOptions is backupOptions for a restore.
func (f *volumeFlags) restoreOptions(ctx context.Context, loc *store.Location) (*restore.PodVolumeOptions, func(), error) {
	if f.byNodeAgent {
		if f.hostPodsDir != "" {
			return nil, nil, errors.New("--volumes-by-node-agent and --host-pods-dir: give one (the node agents, or this process, restore the data)")
		}
		return &restore.PodVolumeOptions{ByNodeAgent: true, HelperImage: f.helperImage}, func() {}, nil
	}
	if f.hostPodsDir == "" {
		return nil, func() {}, nil
	}
	repo, err := f.openRepository(ctx, loc, false)
	if err != nil {
		return nil, nil, err
	}
	return &restore.PodVolumeOptions{Repository: repo, HostPodsDir: f.hostPodsDir, HelperImage: f.helperImage, Wait: f.wait},
		func() { repo.Close(context.WithoutCancel(ctx)) }, nil
}

// backupVolumeRecord reads a backup's volume record; nil when it has none.
func backupVolumeRecord(ctx context.Context, loc *store.Location, name string) (*volumes.BackupRecord, error) {
	rec := &volumes.BackupRecord{}
	err := loc.GetJSON(ctx, store.BackupVolumesKey(name), rec)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// deleteBackup deletes backup name and then the kopia snapshots of every
// backup no longer in the location (this one, and any an interrupted
// delete left), and runs the repository's maintenance, which removes the
// data no remaining snapshot uses. A backup with volume data needs the
// repository password; without it nothing is deleted.
func (f *volumeFlags) deleteBackup(ctx context.Context, loc *store.Location, name string) (int, error) {
	hasVolumes, err := loc.Exists(ctx, store.BackupVolumesKey(name))
	if err != nil {
		return 0, err
	}
	var repo *volumes.Repository
	if hasVolumes {
		if repo, err = f.openRepository(ctx, loc, false); err != nil {
			return 0, fmt.Errorf("backup %s holds pod volume data, whose snapshots are deleted with it: %w", name, err)
		}
		defer repo.Close(context.WithoutCancel(ctx))
	}
	if err := loc.DeleteBackup(ctx, name); err != nil {
		return 0, err
	}
	if repo == nil {
		return 0, nil
	}
	n, err := repo.PruneDeletedBackups(ctx, loc)
	if err != nil {
		return n, fmt.Errorf("backup %s deleted, but its volume data was not all cleaned up (run the delete of another backup, or this one again, to retry): %w", name, err)
	}
	return n, nil
}

// volumeVerify is the verification of one pod volume's snapshot.
type volumeVerify struct {
	Volume string `json:"volume"`
	*volumes.VerifyResult
}

// verifyVolumes reads back every snapshot of backup name (kopia snapshot
// verify, every file). A backup without volume data gives nil.
func (f *volumeFlags) verifyVolumes(ctx context.Context, loc *store.Location, name string) ([]volumeVerify, error) {
	rec, err := backupVolumeRecord(ctx, loc, name)
	if err != nil || rec == nil {
		return nil, err
	}
	repo, err := f.openRepository(ctx, loc, false)
	if err != nil {
		return nil, fmt.Errorf("backup %s holds pod volume data: %w", name, err)
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
	return out, nil
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

// printVolumeRecord lists a backup's pod volumes.
func printVolumeRecord(w io.Writer, rec *volumes.BackupRecord) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD VOLUME\tIDENTITY\tSNAPSHOT\tFILES\tSIZE\tUPLOADED\tTOOK\tERROR")
	for _, v := range rec.Volumes {
		if v.SnapshotResult == nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t%s\n", v.Key(), v.Identity, v.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t-\n", v.Key(), v.Identity, v.SnapshotID, v.Files, humanBytes(v.Bytes), humanBytes(v.UploadedBytes), time.Duration(v.Duration).Round(time.Millisecond))
	}
	for _, s := range rec.Skipped {
		fmt.Fprintf(tw, "%s/%s/%s\t-\tskipped\t-\t-\t-\t-\t%s\n", s.Namespace, s.Pod, s.Volume, s.Reason)
	}
	_ = tw.Flush()
}
