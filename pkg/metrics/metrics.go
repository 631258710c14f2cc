// Package metrics owns ferry's Prometheus metrics of backups, restores,
// migrations and backup storage locations: one set, observed the same way
// by server mode and the hub, each registering it in the registry its
// /metrics serves (Register).
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/report"
)

var (
	backupsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_backups_total", Help: "Backups finished by this process, by phase (Completed, PartiallyFailed, Failed).",
	}, []string{"phase"})
	restoresTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_restores_total", Help: "Restores finished by this process, by phase (Completed, PartiallyFailed, Failed).",
	}, []string{"phase"})
	migrationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_migrations_total", Help: "Migrations finished by this process, by phase (Completed, PartiallyFailed, Failed).",
	}, []string{"phase"})
	// BackupsInProgress and RestoresInProgress count the backups and
	// restores this process is running now.
	BackupsInProgress = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ferry_backups_in_progress", Help: "Backups this process is running now.",
	})
	RestoresInProgress = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ferry_restores_in_progress", Help: "Restores this process is running now.",
	})
	// MigrationsInProgress counts the migrations this process runs now.
	MigrationsInProgress = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ferry_migrations_in_progress", Help: "Migrations this process is running now.",
	})
	backupItems = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ferry_backup_items_total", Help: "Items written into backup archives.",
	})
	restoreItems = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_restore_items_total", Help: "Items restored, by outcome (created, updated, unchanged, skipped, failed).",
	}, []string{"outcome"})
	backupBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ferry_backup_bytes_total", Help: "Bytes of backup archives written to the store (tar.gz, before encryption).",
	})
	backupDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ferry_backup_duration_seconds", Help: "Wall time of finished backups, in seconds.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
	})
	restoreDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ferry_restore_duration_seconds", Help: "Wall time of finished restores, in seconds.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
	})
	migrationDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ferry_migration_duration_seconds", Help: "Wall time of finished migrations, in seconds.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 16),
	})
	locationAvailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ferry_storage_location_available", Help: "1 when the backup storage location passed its last validation, else 0.",
	}, []string{"location"})
)

var registerOnce sync.Once

// Register registers the metrics in reg, once per process (server mode:
// controller-runtime's registry; the hub: the API server's).
func Register(reg prometheus.Registerer) {
	registerOnce.Do(func() {
		reg.MustRegister(backupsTotal, restoresTotal, migrationsTotal, BackupsInProgress, RestoresInProgress, MigrationsInProgress,
			backupItems, restoreItems, backupBytes, backupDuration, restoreDuration, migrationDuration, locationAvailable)
	})
}

// BackupFailed counts a backup that failed before it ran.
func BackupFailed() { backupsTotal.WithLabelValues(string(v1alpha1.PhaseFailed)).Inc() }

// RestoreFailed counts a restore that failed before it ran.
func RestoreFailed() { restoresTotal.WithLabelValues(string(v1alpha1.PhaseFailed)).Inc() }

// BackupFinished observes a finished backup from its status.
func BackupFinished(st *v1alpha1.BackupStatus) {
	backupsTotal.WithLabelValues(string(st.Phase)).Inc()
	backupItems.Add(float64(st.Progress.ItemsBackedUp))
	if a := st.Archive; a != nil {
		backupBytes.Add(float64(a.Size))
	}
	if s, e := st.StartTimestamp, st.CompletionTimestamp; s != nil && e != nil {
		backupDuration.Observe(e.Sub(s.Time).Seconds())
	}
}

// RestoreFinished observes a finished restore from its status.
func RestoreFinished(st *v1alpha1.RestoreStatus) {
	restoresTotal.WithLabelValues(string(st.Phase)).Inc()
	c := st.Counts
	for outcome, n := range map[report.Outcome]int{report.Created: c.Created, report.Updated: c.Updated, report.Unchanged: c.Unchanged, report.Skipped: c.Skipped, report.Failed: c.Failed} {
		restoreItems.WithLabelValues(string(outcome)).Add(float64(n))
	}
	if s, e := st.StartTimestamp, st.CompletionTimestamp; s != nil && e != nil {
		restoreDuration.Observe(e.Sub(s.Time).Seconds())
	}
}

// MigrationFinished counts a migration that ended in phase after seconds.
func MigrationFinished(phase string, seconds float64) {
	migrationsTotal.WithLabelValues(phase).Inc()
	migrationDuration.Observe(seconds)
}

// LocationChecked records whether location passed its check.
func LocationChecked(location string, available bool) {
	v := 0.0
	if available {
		v = 1
	}
	locationAvailable.WithLabelValues(location).Set(v)
}
