package store

import (
	"io"
	"path"
)

var errEOF = io.EOF

// Key names inside a backup's or restore's folder.
const (
	BackupMarker        = "ferry-backup.json"
	BackupStartedMarker = "ferry-backup-started.json"
	RestoreMarker       = "ferry-restore.json"
)

// BackupDir is the key prefix of backup name, with a trailing slash.
func BackupDir(name string) string { return path.Join("backups", name) + "/" }

// RestoreDir is the key prefix of restore name, with a trailing slash.
func RestoreDir(name string) string { return path.Join("restores", name) + "/" }

// ArchiveKey is the key of a backup's resource archive.
func ArchiveKey(name string) string { return BackupDir(name) + name + ".tar.gz" }

// BackupResultsKey is the key of a backup's per-item results.
func BackupResultsKey(name string) string { return BackupDir(name) + name + "-results.json.gz" }

// RestoreResultsKey is the key of a restore's per-item results.
func RestoreResultsKey(name string) string { return RestoreDir(name) + name + "-results.json.gz" }

// BackupImagesKey is the key of a backup's images file: the image
// references its workloads name, their digests and where each is used.
func BackupImagesKey(name string) string { return BackupDir(name) + name + "-images.json" }

// BackupImageIndexKey is the key of the OCI image index of the images a
// backup bundled into the store (spec.images "bundle"); its manifests are
// under ImageBlobKey.
func BackupImageIndexKey(name string) string { return BackupDir(name) + name + "-images-index.json" }

// ImageLayoutKey is the oci-layout file of the store's shared image
// layout (OCI image layout spec: {"imageLayoutVersion": "1.0.0"}).
const ImageLayoutKey = "images/oci-layout"

// ImageBlobKey is the key of a content-addressed image blob (manifest,
// config or layer) shared by all backups: images/blobs/<algorithm>/<hex>.
func ImageBlobKey(algorithm, hex string) string { return "images/blobs/" + algorithm + "/" + hex }

// BackupVolumesKey is the key of a backup's pod volume records (kopia
// snapshot IDs; see pkg/volumes.BackupRecord).
func BackupVolumesKey(name string) string { return BackupDir(name) + name + "-volumes.json" }

// RestoreVolumesKey is the key of a restore's volume records: one
// outcome per claim or pod volume it restored (pkg/volumes.PodVolumeRestore).
func RestoreVolumesKey(name string) string { return RestoreDir(name) + name + "-volumes.json" }

// MigrationJournalKey is the key of staged migration name's journal: its
// stages, the source's recorded replica counts and its cutover's step
// (pkg/migration, docs/design.md#staged-cutover).
func MigrationJournalKey(name string) string { return path.Join("migrations", name, "journal.json") }
