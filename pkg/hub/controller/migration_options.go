package controller

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/helperpod"
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
	o, done, err := r.prepare(ctx, m, p)
	if err != nil {
		return nil, err
	}
	defer done()
	stepCtx, stepErr, cancel := recordSteps(ctx, &o, onStep)
	defer cancel()
	res, err := migration.Run(stepCtx, o)
	if *stepErr != nil {
		return res, *stepErr
	}
	return res, err
}

// recordSteps sets o.OnStep to call onStep; when a step cannot be
// recorded, the context it returns is cancelled and *stepErr says why.
func recordSteps(ctx context.Context, o *migration.Options, onStep func(migration.Step) error) (context.Context, *error, context.CancelFunc) {
	stepErr := new(error)
	stepCtx, cancel := context.WithCancel(ctx)
	o.OnStep = func(s migration.Step) {
		if err := onStep(s); err != nil && *stepErr == nil {
			*stepErr = err // the step could not be recorded: stop
			cancel()
		}
	}
	return stepCtx, stepErr, cancel
}

// prepare connects to m's location and clusters and returns the
// migration's options, checked; done closes what they opened.
func (r *MigrationReconciler) prepare(ctx context.Context, m *v1beta1.Migration, p *progress) (o migration.Options, done func(), err error) {
	// The location and its Credentials first: their errors are the
	// Migration's own, and need no cluster.
	loc, creds, err := OpenLocation(ctx, r.Reader, m)
	if err != nil {
		return o, nil, err
	}
	defer func() {
		if err != nil {
			loc.Close()
		}
	}()
	src, srcSpec, err := r.connect(ctx, m.Namespace, m.Spec.Source.Cluster, "spec.source.cluster", "SourceUnreachable")
	if err != nil {
		return o, nil, err
	}
	dst, dstSpec, err := r.connect(ctx, m.Namespace, m.Spec.Target.Cluster, "spec.target.cluster", "TargetUnreachable")
	if err != nil {
		return o, nil, err
	}
	if err := migration.CheckClusters(ctx, src, dst); err != nil {
		return o, nil, fail("SameCluster", "spec.source.cluster %q and spec.target.cluster %q: %w", m.Spec.Source.Cluster, m.Spec.Target.Cluster, err)
	}
	o = options(m, src, dst, loc)
	setDeadlines(&o, m.Spec.Timeouts, r.Deadlines)
	closeVolumes, err := r.volumes(ctx, &o, m, srcSpec, dstSpec, creds)
	if err != nil {
		return o, nil, err
	}
	o.Backup.OnProgress = func(done, _ int) { p.mu.Lock(); p.backedUp = int64(done); p.mu.Unlock() }
	o.Restore.OnProgress = func(done, _ int) { p.mu.Lock(); p.stored = int64(done); p.mu.Unlock() }
	if err := o.Validate(); err != nil {
		closeVolumes()
		return o, nil, fail("InvalidSpec", "%w", err)
	}
	return o, func() { closeVolumes(); loc.Close() }, nil
}

// connect reaches the Cluster name of the Migration's namespace (see
// connectRef).
func (r *MigrationReconciler) connect(ctx context.Context, namespace, name, path, reason string) (*kube.Cluster, *v1beta1.Cluster, error) {
	return connectRef(ctx, r.Reader, &r.Options, namespace, name, path, reason)
}

// volumes sets the pod volume options of o: helper pods in both clusters,
// given the location's credentials creds (nil: the hub's own), when the
// hub has a repository password; otherwise a volume whose data a
// pod asks for fails with the reason, and spec.volumes fails the
// Migration at once.
func (r *MigrationReconciler) volumes(ctx context.Context, o *migration.Options, m *v1beta1.Migration, src, dst *v1beta1.Cluster, creds map[string]string) (func(), error) {
	if r.Volumes.Password == "" {
		if m.Spec.Staged != nil {
			return nil, fail("NoRepositoryPassword", "spec.staged: a staged Migration moves volume data: %w", errNoPassword)
		}
		if m.Spec.Volumes {
			return nil, fail("NoRepositoryPassword", "spec.volumes: %w", errNoPassword)
		}
		o.Backup.PodVolumes = &backup.PodVolumeOptions{Backup: helperpod.FailVolumes(errNoPassword)}
		return func() {}, nil
	}
	s := r.Volumes
	s.Log = r.Log
	if creds != nil {
		s.Credentials = creds // spec.storage.credentialRef's, not the hub's own
	}
	s.NodePodsDir = src.Spec.NodePodsDir
	bpv, _, closeB, err := helperpod.BackupOptions(ctx, o.Location, o.Source, s)
	if err != nil {
		return nil, fail("VolumeRepositoryUnavailable", "spec.storage.location: the volume repository: %w", err)
	}
	s.NodePodsDir = dst.Spec.NodePodsDir
	rpv, _, closeR, err := helperpod.RestoreOptions(ctx, o.Location, o.Target, s)
	if err != nil {
		closeB()
		return nil, fail("VolumeRepositoryUnavailable", "spec.storage.location: the volume repository: %w", err)
	}
	o.Backup.PodVolumes, o.Restore.PodVolumes = bpv, rpv
	return func() { closeB(); closeR() }, nil
}

// reasonUnreachable is connectCluster's reason for an API server that does
// not answer.
const reasonUnreachable = "Unreachable"

// connectCluster reaches member cluster c through its ClusterCredential's
// kubeconfig, within o.ConnectTimeout; each later request waits at most
// o.RequestTimeout for its answer to start.
func connectCluster(ctx context.Context, reader client.Reader, c *v1beta1.Cluster, o *Options) (*kube.Cluster, error) {
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
	cctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	cl, err := kube.ConnectWithTimeout(cctx, c.Name, cfg, o.RequestTimeout)
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
		PreferredVersionOnly:     s.Backup.PreferredVersionOnly,
		Images:                   mode,
		ImageRegistryMappings:    s.Images.RegistryMappings,
		ImagesRequired:           s.Images.Required,
		DefaultVolumesToFsBackup: s.Volumes || s.Staged != nil,
	}
	rs := s.Restore
	rspec := v1alpha1.RestoreSpec{
		NamespaceMapping:         rs.NamespaceMapping,
		StorageClassMapping:      rs.StorageClassMapping,
		ExistingResourcePolicy:   v1alpha1.ExistingResourcePolicy(rs.ExistingResourcePolicy),
		ExistingVolumeDataPolicy: v1alpha1.ExistingVolumeDataPolicy(rs.ExistingVolumeDataPolicy),
		PreserveNodePorts:        rs.PreserveNodePorts,
		RestoreStatus:            rs.RestoreStatus,
		ResourceModifiers:        rs.ResourceModifiers,
		FromCloud:                rs.FromCloud,
		ToCloud:                  rs.ToCloud,
		DryRun:                   rs.DryRun,
		ImageRegistryMappings:    s.Images.RegistryMappings,
		PushImages:               mode == images.ModeBundle,
		ImagesRequired:           s.Images.Required,
	}
	if rt := s.VerifyRuntime; rt != nil {
		rspec.VerifyRuntime = &v1alpha1.RuntimeVerification{Skip: rt.Skip, Timeout: rt.Timeout}
	}
	ropts := restore.Options{Spec: rspec}
	if rs.CRDTimeout != nil {
		ropts.CRDTimeout = rs.CRDTimeout.Duration
	}
	verify := s.Verify == nil || *s.Verify
	return migration.Options{
		Name: m.Name, Source: src, Target: dst, Location: loc, Verify: verify,
		Backup:  backup.Options{Spec: bspec, UID: m.UID},
		Restore: ropts,
	}
}

// setDeadlines sets o's step deadlines: spec.timeouts, each unset one the
// hub's.
func setDeadlines(o *migration.Options, t *v1beta1.MigrationTimeouts, hub Deadlines) {
	if t == nil {
		t = &v1beta1.MigrationTimeouts{}
	}
	pick := func(spec *metav1.Duration, def time.Duration, field string) deadline.Deadline {
		if spec != nil {
			return deadline.Deadline{After: spec.Duration, Field: field}
		}
		return deadline.Deadline{After: def, Field: field + " (unset: the hub's default)"}
	}
	o.Backup.Deadline = pick(t.Backup, hub.Backup, "spec.timeouts.backup")
	o.Restore.Deadline = pick(t.Restore, hub.Restore, "spec.timeouts.restore")
	o.Restore.VerifyDeadline = pick(t.Verify, hub.Verify, "spec.timeouts.verify")
}

// errNoPassword is why a hub without a repository password moves no pod
// volume data.
var errNoPassword = errors.New("the hub has no volume repository password (ferry hub --repository-password-file, or $" + volumes.EnvPassword + ")")
