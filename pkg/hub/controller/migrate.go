package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// migrate connects to m's clusters and location and runs the migration,
// calling onStep (which records the step) before each step starts.
func (r *MigrationReconciler) migrate(ctx context.Context, m *v1beta1.Migration, p *progress, onStep func(migration.Step) error) (*migration.Result, error) {
	src, err := r.connect(ctx, m.Namespace, m.Spec.Source.Cluster, "spec.source.cluster", "SourceUnreachable")
	if err != nil {
		return nil, err
	}
	dst, err := r.connect(ctx, m.Namespace, m.Spec.Target.Cluster, "spec.target.cluster", "TargetUnreachable")
	if err != nil {
		return nil, err
	}
	if src.Config.Host == dst.Config.Host {
		return nil, fail("SameCluster", "spec.source.cluster %q and spec.target.cluster %q are the same cluster (%s)", m.Spec.Source.Cluster, m.Spec.Target.Cluster, src.Config.Host)
	}
	loc, err := store.Open(ctx, m.Spec.Storage.Location)
	if err != nil {
		return nil, fail("StorageUnavailable", "spec.storage.location: %w", err)
	}
	defer loc.Close()
	o := options(m, src, dst, loc)
	o.Backup.OnProgress = func(done, _ int) { p.mu.Lock(); p.backedUp = int64(done); p.mu.Unlock() }
	o.Restore.OnProgress = func(done, _ int) { p.mu.Lock(); p.stored = int64(done); p.mu.Unlock() }
	var stepErr error
	stepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	o.OnStep = func(s migration.Step) {
		if err := onStep(s); err != nil && stepErr == nil {
			stepErr = err // the step could not be recorded: stop
			cancel()
		}
	}
	if err := o.Validate(); err != nil {
		return nil, fail("InvalidSpec", "%w", err)
	}
	res, err := migration.Run(stepCtx, o)
	if stepErr != nil {
		return res, stepErr
	}
	return res, err
}

// connect reaches the Cluster name of namespace through its
// ClusterCredential's kubeconfig. Errors name the field (path) and carry
// the Migration's reason.
func (r *MigrationReconciler) connect(ctx context.Context, namespace, name, path, reason string) (*kube.Cluster, error) {
	var c v1beta1.Cluster
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fail("ClusterNotFound", "%s: Cluster %q not found in namespace %s", path, name, namespace)
		}
		return nil, err
	}
	cl, err := connectCluster(ctx, r.Reader, &c, r.ConnectTimeout)
	var f *failure
	switch {
	case errors.As(err, &f) && f.reason == reasonUnreachable:
		return nil, fail(reason, "%s: %w", path, f.err)
	case errors.As(err, &f):
		return nil, fail(f.reason, "%s: %w", path, f.err)
	}
	return cl, err
}

// reasonUnreachable is connectCluster's reason for an API server that does
// not answer.
const reasonUnreachable = "Unreachable"

// connectCluster reaches member cluster c through its ClusterCredential's
// kubeconfig, within timeout.
func connectCluster(ctx context.Context, reader client.Reader, c *v1beta1.Cluster, timeout time.Duration) (*kube.Cluster, error) {
	var cred v1beta1.ClusterCredential
	if err := reader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.CredentialRef.Name}, &cred); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fail("ClusterCredentialNotFound", "Cluster %q: its spec.credentialRef names ClusterCredential %q, which is not found", c.Name, c.Spec.CredentialRef.Name)
		}
		return nil, err
	}
	cfg, err := kube.RESTConfigFromKubeconfig(cred.Kubeconfig, c.Spec.Context)
	if err != nil {
		return nil, fail("InvalidClusterCredential", "Cluster %q: ClusterCredential %q: %w", c.Name, cred.Name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := kube.Connect(cctx, c.Name, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fail(reasonUnreachable, "%w", err)
	}
	return cl, nil
}

// options are the migration's options from m's spec.
func options(m *v1beta1.Migration, src, dst *kube.Cluster, loc *store.Location) migration.Options {
	s := m.Spec
	mode := s.Images.Mode
	if mode == "" {
		mode = images.ModeRecord
	}
	bspec := v1alpha1.BackupSpec{
		IncludedNamespaces:       s.Backup.IncludedNamespaces,
		ExcludedNamespaces:       s.Backup.ExcludedNamespaces,
		IncludedResources:        s.Backup.IncludedResources,
		ExcludedResources:        s.Backup.ExcludedResources,
		LabelSelector:            s.Backup.LabelSelector,
		IncludeClusterResources:  s.Backup.IncludeClusterResources,
		TTL:                      s.Backup.TTL,
		Images:                   mode,
		ImageRegistryMappings:    s.Images.RegistryMappings,
		DefaultVolumesToFsBackup: s.Volumes,
	}
	rspec := v1alpha1.RestoreSpec{
		NamespaceMapping:       s.Restore.NamespaceMapping,
		StorageClassMapping:    s.Restore.StorageClassMapping,
		ExistingResourcePolicy: v1alpha1.ExistingResourcePolicy(s.Restore.ExistingResourcePolicy),
		ImageRegistryMappings:  s.Images.RegistryMappings,
		PushImages:             mode == images.ModeBundle,
	}
	verify := s.Verify == nil || *s.Verify
	return migration.Options{
		Name: m.Name, Source: src, Target: dst, Location: loc, Verify: verify,
		Backup:  backup.Options{Spec: bspec, UID: m.UID, PodVolumes: &backup.PodVolumeOptions{Backup: noVolumeData}},
		Restore: restore.Options{Spec: rspec},
	}
}

// errNoVolumeData is why the hub moves no pod volume data yet.
var errNoVolumeData = errors.New("the hub does not move pod volume data yet: run `ferry migrate` from a machine that reaches both clusters, or ferry server with its node agents")

// noVolumeData fails each pod volume whose data was asked for, with the
// reason: a backup that leaves it out says so.
func noVolumeData(_ context.Context, _ string, vols []volumes.PodVolume, _ func(volumes.Totals)) []volumes.PodVolumeBackup {
	out := make([]volumes.PodVolumeBackup, len(vols))
	for i, v := range vols {
		out[i] = volumes.PodVolumeBackup{PodVolume: v, Error: fmt.Sprintf("volume %s: %v", v.Key(), errNoVolumeData)}
	}
	return out
}
