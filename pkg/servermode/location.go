package servermode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/install"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/storagelocation"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// helpers returns the helper pods (pkg/helperpod.Helpers) of a backup or
// restore through bsl in cluster, with settings s: they run s.Image, with
// the location's URL, credentials and the repository password in their
// Secret. close removes whatever they left.
func helpers(ctx context.Context, secrets client.Reader, cluster *kube.Cluster, bsl *v1alpha1.BackupStorageLocation, s helperpod.Settings, log *slog.Logger) (*helperpod.Helpers, error) {
	s, err := helperSettings(ctx, secrets, bsl, s, log)
	if err != nil {
		return nil, err
	}
	return helperpod.New(ctx, bsl.Spec.URL, cluster, s)
}

// helperSettings are the server's helper pod settings s with location
// bsl's credentials, checked: the server needs a repository password and
// a helper image.
func helperSettings(ctx context.Context, secrets client.Reader, bsl *v1alpha1.BackupStorageLocation, s helperpod.Settings, log *slog.Logger) (helperpod.Settings, error) {
	if s.Password == "" {
		return s, fmt.Errorf("the ferry server has no volume repository password ($%s, from key %q of Secret %s, which the Helm-less install creates)", volumes.EnvPassword, install.RepositorySecretKey, install.RepositorySecretName)
	}
	if s.Image == "" {
		return s, errors.New("the ferry server has no helper image (servermode.Options.RestoreHelperImage)")
	}
	creds, err := storagelocation.Credentials(ctx, secrets, bsl)
	if err != nil {
		return s, err
	}
	if creds == nil {
		creds = map[string]string{} // the server's workload identity, not its environment's keys
	}
	s.Credentials, s.Log = creds, log
	return s, nil
}

// locationOf is the name of the location a Backup belongs to: its label
// (set when the server processed or synced it), else its spec.
func locationOf(b *v1alpha1.Backup) string {
	if l := b.Labels[v1alpha1.LabelStorageLocation]; l != "" {
		return l
	}
	return b.Spec.StorageLocationName
}
