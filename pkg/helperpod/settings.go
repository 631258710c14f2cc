package helperpod

// This file is the one factory of volume helpers (New) and the pod volume
// options of a backup or a restore whose data moves through them
// (BackupOptions, RestoreOptions): `ferry backup create`, `ferry restore
// create` and `ferry migrate` without a node agent, the hub's Migrations,
// Backups and Restores, and server mode's claims.

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// Settings are the helper pods' own.
type Settings struct {
	// Image is ferry's image, which the helpers (and a restore's
	// ferry-restore-wait init container) run.
	Image string
	// Password is the volume repository's.
	Password string
	// NodePodsDir is the kubelet's pods directory on the cluster's nodes
	// (default helperpod.DefaultNodePodsDir).
	NodePodsDir string
	// StartTimeout bounds each helper's start, and the wait for each
	// restored pod; Unschedulable how long the scheduler may find no node.
	StartTimeout, Unschedulable time.Duration
	// Sparse restores files sparsely.
	Sparse bool
	// Credentials are the location's, given to the helpers (server mode:
	// its BackupStorageLocation's Secret); nil: this process's
	// environment's (store.EnvCredentials), as the CLI and the hub have
	// them.
	Credentials map[string]string
	Log         *slog.Logger
}

// New returns the helper pods of cluster for the location at url (with its
// credentials, if any), with the location's URL, its credentials and the
// password in their Secret: the one factory of helper pods, for the CLI,
// server mode and the hub.
func New(ctx context.Context, url string, cluster *kube.Cluster, s Settings) (*Helpers, error) {
	creds := s.Credentials
	if creds == nil {
		var err error
		if creds, err = store.EnvCredentials(ctx, url); err != nil && s.Log != nil {
			// The helpers may still have an identity of their own in the
			// cluster (a workload identity); if not, each says so.
			s.Log.Warn("no credentials to give the helper pods", "error", err)
		}
	}
	env, err := HelperEnv(url, s.Password, creds)
	if err != nil {
		return nil, err
	}
	return &Helpers{Client: cluster.Typed, Run: NewRun(cluster.Typed, s.Log), Image: s.Image, Env: env,
		NodePodsDir: s.NodePodsDir, StartTimeout: s.StartTimeout, Unschedulable: s.Unschedulable, Sparse: s.Sparse}, nil
}

// BackupOptions returns the pod volume options of a backup of cluster through
// helper pods, and the helpers (nil when they could not be made: then each
// volume fails with the reason). closeAll removes the helpers and closes
// the repository, which is created if missing.
func BackupOptions(ctx context.Context, loc *store.Location, cluster *kube.Cluster, s Settings) (*backup.PodVolumeOptions, *Helpers, func(), error) {
	repo, err := volumes.Open(ctx, loc, s.Password, volumes.OpenOptions{Create: true})
	if err != nil {
		return nil, nil, nil, err
	}
	closeRepo := func() { repo.Close(context.WithoutCancel(ctx)) }
	h, err := New(ctx, loc.SecretURL(), cluster, s)
	if err != nil {
		closeRepo()
		return &backup.PodVolumeOptions{Backup: FailVolumes(err)}, nil, func() {}, nil
	}
	return &backup.PodVolumeOptions{Repository: repo, Backup: h.Backup, UnmountedClaims: true}, h,
		func() { h.Run.Close(ctx); closeRepo() }, nil
}

// RestoreOptions returns the pod volume options of a restore into cluster through
// helper pods, which fill each claim before its workloads are created, and
// the helpers (nil when they could not be made: then a restore of volume
// data fails with the reason, in Check). closeAll removes the helpers.
func RestoreOptions(ctx context.Context, loc *store.Location, cluster *kube.Cluster, s Settings) (*restore.PodVolumeOptions, *Helpers, func(), error) {
	h, err := New(ctx, loc.SecretURL(), cluster, s)
	if err != nil {
		// Only a backup with volume data needs the helpers.
		return &restore.PodVolumeOptions{HelperImage: s.Image, Check: func(context.Context) error { return err }}, nil, func() {}, nil
	}
	check := func(ctx context.Context) error {
		repo, err := volumes.Open(ctx, loc, s.Password, volumes.OpenOptions{})
		if err != nil {
			return err
		}
		return repo.Close(context.WithoutCancel(ctx))
	}
	return &restore.PodVolumeOptions{HelperImage: s.Image, Wait: s.StartTimeout, Claims: h.RestoreClaims, Restore: h.RestorePodVolumes, CheckClaims: h.CheckClaims, Check: check}, h,
		func() { h.Run.Close(ctx) }, nil
}

// FailVolumes backs up nothing: each volume fails with err.
func FailVolumes(err error) func(context.Context, string, []volumes.PodVolume, func(volumes.Totals)) []volumes.PodVolumeBackup {
	return func(_ context.Context, _ string, vols []volumes.PodVolume, _ func(volumes.Totals)) []volumes.PodVolumeBackup {
		out := make([]volumes.PodVolumeBackup, len(vols))
		for i, v := range vols {
			out[i] = volumes.PodVolumeBackup{PodVolume: v, Error: fmt.Sprintf("volume %s: %v", v.Key(), err)}
		}
		return out
	}
}
