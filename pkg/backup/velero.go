package backup

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/store"
)

// veleroFormats are the Velero archive format versions ferry reads
// (Velero's pkg/apis/velero/v1 BackupFormatVersion; 1.1.0 added the
// per-version directories of EnableAPIGroupVersions).
var veleroFormats = map[string]bool{"1.0.0": true, "1.1.0": true}

// veleroBackup is the part of Velero's velero-backup.json ferry reads.
type veleroBackup struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Status   struct {
		Phase         string `json:"phase"`
		FormatVersion string `json:"formatVersion"`
	} `json:"status"`
}

// LoadVelero reads a backup made by Velero from loc's object-store layout
// (backups/<name>/velero-backup.json and backups/<name>/<name>.tar.gz) and
// returns its archive's items. Velero writes an object at its preferred
// version twice (resources/<gr>/namespaces/... and
// resources/<gr>/<v>-preferredversion/namespaces/...) and at its other
// versions under resources/<gr>/<v>/...; the plan keeps one primary copy
// per object and the others as alternatives (splitCopies). A legacy copy's
// version comes from its apiVersion at plan time.
// Velero archives carry no digests, so only their gzip and tar structure
// can be checked. As for Load, the caller must Close the archive.
func LoadVelero(ctx context.Context, loc *store.Location, name string) (*archive.Archive, *v1alpha1.Backup, error) {
	if err := store.ValidateBackupName(name); err != nil {
		return nil, nil, err
	}
	var vb veleroBackup
	if err := loc.GetJSON(ctx, store.BackupDir(name)+"velero-backup.json", &vb); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, fmt.Errorf("%w: Velero backup %q in %s (no backups/%s/velero-backup.json): %w", ErrNotRestorable, name, loc.URL(), name, store.ErrNotFound)
		}
		return nil, nil, fmt.Errorf("backup %q (Velero): %w", name, err)
	}
	if vb.Status.Phase != "Completed" && vb.Status.Phase != "PartiallyFailed" {
		return nil, nil, fmt.Errorf("%w: Velero backup %q is %q", ErrNotRestorable, name, vb.Status.Phase)
	}
	key := store.BackupDir(name) + name + ".tar.gz"
	rd, err := loc.NewOpenedReader(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: Velero backup %q: %w", ErrNotRestorable, name, err)
	}
	defer rd.Close()
	a, err := archive.Read(rd, key, archive.Expect{AllowNoManifest: true})
	if err != nil {
		return nil, nil, fmt.Errorf("backup %q (Velero): %w", name, err)
	}
	if !veleroFormats[a.Version] {
		a.Close()
		return nil, nil, fmt.Errorf("backup %q (Velero): archive format version %q in %s is not one ferry reads (%s)", name, a.Version, archive.VersionPath, "1.0.0, 1.1.0")
	}
	b := v1alpha1.NewBackup(name)
	b.Status.Phase = v1alpha1.Phase(vb.Status.Phase)
	b.Status.Archive = &v1alpha1.ArchiveSummary{Key: key, Entries: len(a.Items)}
	return a, b, nil
}
