package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StagedMigration makes a Migration a staged one, as ferry migrate stage
// and cutover run it (docs/design.md#staged-cutover): while the source
// runs, a stage every Interval copies the selected claims' data into the
// target's claims (only what changed since the last stage); no workload
// runs in the target. Once Cutover is set, the next step is the cutover:
// the source is quiesced, the final delta and the resources are restored,
// and the Migration ends when the target's workloads are Ready and
// verified. A staged Migration moves volume data: spec.volumes is
// implied.
type StagedMigration struct {
	// Interval is the time from one stage's start to the next's (at least
	// 10s); a stage that takes longer is followed by the next at once.
	Interval metav1.Duration `json:"interval"`
	// Cutover, once true, starts the cutover after the stage running (if
	// any). It cannot be unset: to go back after a cutover, use ferry
	// migrate rollback against the same location.
	// +optional
	Cutover bool `json:"cutover,omitempty"`
	// MaxDowntime, if set, runs more stages at the cutover until the
	// predicted downtime is under it, at most MaxStages stages in all
	// (default 5); a prediction that does not get under it fails the
	// Migration before the source is quiesced.
	// +optional
	MaxDowntime *metav1.Duration `json:"maxDowntime,omitempty"`
	// +optional
	MaxStages int32 `json:"maxStages,omitempty"`
}

// MigrationStage is what one stage of a staged Migration moved, summed
// over its claims.
type MigrationStage struct {
	Number    int32       `json:"number"`
	StartTime metav1.Time `json:"startTime"`
	// CompletionTime is unset while the stage runs, or when it did not end.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Claims counts the claims the stage copied.
	Claims int32 `json:"claims"`
	// ScannedBytes are the claims' files; ChangedBytes those of the files
	// written into the target's claims (new or changed since the last
	// stage); UploadedBytes what the snapshots wrote to the location.
	ScannedBytes  int64 `json:"scannedBytes"`
	ChangedBytes  int64 `json:"changedBytes"`
	UploadedBytes int64 `json:"uploadedBytes"`
	// ChangedFiles, RemovedFiles and VanishedFiles count the files written,
	// removed from the target (the source removed them), and removed
	// while the source was read (a live application's; never an error).
	// +optional
	ChangedFiles int64 `json:"changedFiles,omitempty"`
	// +optional
	RemovedFiles int64 `json:"removedFiles,omitempty"`
	// +optional
	VanishedFiles int64 `json:"vanishedFiles,omitempty"`
	// Message says why the stage failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// MigrationPrediction is a staged Migration's predicted cutover downtime,
// from measured rates (ferry migrate cutover prints it).
type MigrationPrediction struct {
	// Total is the predicted downtime: the sum of the four steps.
	Total metav1.Duration `json:"total"`
	// Quiesce is the source pods' termination.
	Quiesce metav1.Duration `json:"quiesce"`
	// Delta is the final delta's snapshot and write.
	Delta metav1.Duration `json:"delta"`
	// Restore is the resources' restore at the target's create rate.
	Restore metav1.Duration `json:"restore"`
	// Start is the target's start, until its pods are Ready.
	Start metav1.Duration `json:"start"`
	// DeltaBytes is the predicted change since the last stage.
	DeltaBytes int64 `json:"deltaBytes"`
	// Objects is how many objects the cutover restores.
	Objects int32 `json:"objects"`
	// Basis says what each figure was computed from.
	// +optional
	Basis []string `json:"basis,omitempty"`
}

// MigrationCutover is a staged Migration's cutover.
type MigrationCutover struct {
	// Name is the cutover's backup and restore in the location
	// (<migration>-cutover-<n>); the Migration's report is theirs.
	Name string `json:"name"`
	// Step is Predicted, Quiescing, Quiesced, Done or RollingBack.
	Step string `json:"step"`
	// Workloads counts the source workloads quiesced.
	// +optional
	Workloads int32 `json:"workloads,omitempty"`
	// QuiesceTime is when the first source workload was scaled down: the
	// downtime's start.
	// +optional
	QuiesceTime *metav1.Time `json:"quiesceTime,omitempty"`
	// ReadyTime is when the target's workloads were all Ready: the
	// downtime's end.
	// +optional
	ReadyTime *metav1.Time `json:"readyTime,omitempty"`
	// Downtime is ReadyTime - QuiesceTime, beside Predicted.
	// +optional
	Downtime *metav1.Duration `json:"downtime,omitempty"`
	// Predicted is the prediction the cutover started with.
	Predicted metav1.Duration `json:"predicted"`
}
