package servermode

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Prometheus metrics of the server, served on /metrics with
// controller-runtime's own (workqueue, reconcile, client-go).
var (
	backupsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_backups_total", Help: "Backups finished by this server, by phase (Completed, PartiallyFailed, Failed).",
	}, []string{"phase"})
	restoresTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_restores_total", Help: "Restores finished by this server, by phase (Completed, PartiallyFailed, Failed).",
	}, []string{"phase"})
	backupsInProgress = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ferry_backups_in_progress", Help: "Backups this server is running now.",
	})
	restoresInProgress = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ferry_restores_in_progress", Help: "Restores this server is running now.",
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
	locationAvailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ferry_storage_location_available", Help: "1 when the backup storage location passed its last validation, else 0.",
	}, []string{"location"})
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(backupsTotal, restoresTotal, backupsInProgress, restoresInProgress,
			backupItems, restoreItems, backupBytes, backupDuration, restoreDuration, locationAvailable)
	})
}
