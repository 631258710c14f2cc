package migration

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/store"
)

// Journal is a staged migration's record in the location
// (store.MigrationJournalKey): what its stages moved, the source's
// workloads as they were before the cutover quiesced them, and where the
// cutover is. It is written before each step that changes a cluster, so a
// process killed anywhere leaves a journal from which the next cutover
// finishes or a rollback undoes (docs/design.md#staged-cutover).
type Journal struct {
	Name string `json:"name"`
	// Backup and Restore are the specs the first stage was given; later
	// stages and the cutover use them.
	Backup  v1alpha1.BackupSpec  `json:"backup"`
	Restore v1alpha1.RestoreSpec `json:"restore"`
	Stages  []StageRecord        `json:"stages,omitempty"`
	Cutover *CutoverRecord       `json:"cutover,omitempty"`
	// SourceID and TargetID are the clusters' IDs (kube-system's UID) at
	// the first stage: every later command checks it was given the same
	// two, the same way round.
	SourceID string `json:"sourceID,omitempty"`
	TargetID string `json:"targetID,omitempty"`
	// Cutovers counts the cutovers begun (a rollback ends one; the next
	// takes a new backup, as the source ran again).
	Cutovers int `json:"cutovers,omitempty"`
	// RolledBack is when a rollback last finished; a new stage starts the
	// migration again.
	RolledBack *time.Time `json:"rolledBack,omitempty"`
	// Finished is when the user declared the migration done (Finish):
	// no stage, cutover or rollback runs after it.
	Finished *time.Time `json:"finished,omitempty"`
}

// ErrFinished is wrapped when a migration declared done is asked to run
// a stage, a cutover or a rollback.
var ErrFinished = errors.New("the migration was declared done")

// finished refuses a journal declared done.
func (j *Journal) finished() error {
	if j.Finished != nil {
		return fmt.Errorf("migration %s: %w at %s; a new migration needs another name", j.Name, ErrFinished, j.Finished.Format(time.RFC3339))
	}
	return nil
}

// Finish declares staged migration name done: its cutover finished, and
// from now on no rollback is offered (the source's recorded counts stay
// in the journal).
func Finish(ctx context.Context, loc *store.Location, name string) (*Journal, error) {
	j, err := LoadJournal(ctx, loc, name)
	if err != nil {
		return nil, err
	}
	if err := j.finished(); err != nil {
		return j, err
	}
	if j.Cutover == nil || j.Cutover.Step != CutoverDone || j.Cutover.Phase != v1alpha1.PhaseCompleted {
		step := "none began"
		if j.Cutover != nil {
			step = "it is at step " + string(j.Cutover.Step)
			if j.Cutover.Phase != "" && j.Cutover.Phase != v1alpha1.PhaseCompleted {
				step += ", its migration " + string(j.Cutover.Phase) + ": run ferry migrate cutover again once the cause is fixed, or roll back"
			}
		}
		return j, fmt.Errorf("migration %s: only a migration whose cutover finished can be declared done (%s)", name, step)
	}
	now := time.Now()
	j.Finished = &now
	return j, j.save(ctx, loc)
}

// StageRecord is one stage: an incremental snapshot of every selected
// claim of the source, written into the target's claims.
type StageRecord struct {
	Number int `json:"number"`
	// Name is the stage's backup and restore.
	Name    string    `json:"name"`
	Started time.Time `json:"started"`
	// Ended is zero for a stage that did not finish (its process was
	// killed): the next stage runs under its number again.
	Ended  time.Time     `json:"ended,omitempty"`
	Claims []ClaimStage  `json:"claims,omitempty"`
	Error  string        `json:"error,omitempty"`
	Rates  MeasuredRates `json:"rates"`
}

// Duration is how long the stage took.
func (s StageRecord) Duration() time.Duration { return s.Ended.Sub(s.Started) }

// ChangedBytes sums the claims' changed bytes.
func (s StageRecord) ChangedBytes() (n int64) {
	for _, c := range s.Claims {
		n += c.ChangedBytes
	}
	return n
}

// ClaimStage is what one stage did for one claim.
type ClaimStage struct {
	// Claim is the source's namespace/name; Target the target's.
	Claim      string `json:"claim"`
	Target     string `json:"target"`
	SnapshotID string `json:"snapshotID"`
	// ScannedBytes are the claim's files; ChangedBytes those of the files
	// written into the target's claim (new or changed since the last
	// stage); UploadedBytes what the snapshot wrote to the location
	// (after deduplication and compression).
	ScannedBytes  int64 `json:"scannedBytes"`
	ChangedBytes  int64 `json:"changedBytes"`
	ChangedFiles  int64 `json:"changedFiles"`
	UploadedBytes int64 `json:"uploadedBytes"`
	Removed       int64 `json:"removed"`
	// Vanished counts the files removed while the source was read (a live
	// application's); VanishedPaths names the first few. They never fail a
	// stage.
	Vanished      int64         `json:"vanished,omitempty"`
	VanishedPaths []string      `json:"vanishedPaths,omitempty"`
	Changed       int64         `json:"changed,omitempty"`
	Snapshot      time.Duration `json:"snapshot"`
	Write         time.Duration `json:"write"`
	Error         string        `json:"error,omitempty"`
}

// MeasuredRates are what a stage measured of the two clusters, for the
// cutover's prediction.
type MeasuredRates struct {
	// CreatesPerSecond is the target API server's measured create rate
	// (server-side dry-run creates at the restore's concurrency).
	CreatesPerSecond float64 `json:"createsPerSecond,omitempty"`
	// Objects is how many objects the stage's backup holds: what the
	// cutover restores.
	Objects int `json:"objects,omitempty"`
	// Start is the longest time a running source pod of the selection
	// took from its creation to Ready.
	Start time.Duration `json:"start,omitempty"`
	// Quiesce is the longest termination grace a source pod with a
	// preStop hook asks for (pods without one stop on SIGTERM).
	Quiesce time.Duration `json:"quiesce,omitempty"`
}

// CutoverStep is where a cutover is.
type CutoverStep string

// A cutover's steps, in order.
const (
	CutoverPredicted CutoverStep = "Predicted"
	CutoverQuiescing CutoverStep = "Quiescing"
	CutoverQuiesced  CutoverStep = "Quiesced"
	CutoverDone      CutoverStep = "Done"
	CutoverRolling   CutoverStep = "RollingBack"
)

// CutoverRecord is the cutover: its prediction, the source's workloads as
// they were, and what happened when.
type CutoverRecord struct {
	// Name is the cutover's final backup and restore: NAME-cutover-N.
	Name       string      `json:"name"`
	Step       CutoverStep `json:"step"`
	Prediction Prediction  `json:"prediction"`
	// Workloads are the source's quiesced workloads with their recorded
	// replica counts and suspensions, written before any is scaled.
	Workloads []v1alpha1.QuiescedWorkload `json:"workloads,omitempty"`
	Started   time.Time                   `json:"started"`
	// Hooks counts the pre hooks run in the source before the quiesce.
	Hooks int `json:"hooks,omitempty"`
	// QuiesceStarted is when the first source workload was scaled down;
	// PodsGone when its pods were all gone; Ready when the target's
	// workloads were all Ready. Downtime is Ready - QuiesceStarted.
	QuiesceStarted time.Time     `json:"quiesceStarted,omitempty"`
	PodsGone       time.Time     `json:"podsGone,omitempty"`
	DeltaDone      time.Time     `json:"deltaDone,omitempty"`
	Restored       time.Time     `json:"restored,omitempty"`
	Ready          time.Time     `json:"ready,omitempty"`
	Downtime       time.Duration `json:"downtime,omitempty"`
	Error          string        `json:"error,omitempty"`
	// Phase is the final migration's outcome.
	Phase v1alpha1.Phase `json:"phase,omitempty"`
	// targetReady is when the watch of the quiesced workloads' copies saw
	// them all healthy (watchReady); zero if it did not first.
	targetReady time.Time
}

// ErrNoJournal is wrapped when a migration has no journal: no stage ran.
var ErrNoJournal = errors.New("no stage of this migration has run: it has no journal")

// LoadJournal reads migration name's journal.
func LoadJournal(ctx context.Context, loc *store.Location, name string) (*Journal, error) {
	var j Journal
	err := loc.GetJSON(ctx, store.MigrationJournalKey(name), &j)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("migration %s: %w (%s in %s)", name, ErrNoJournal, store.MigrationJournalKey(name), loc.URL())
	}
	if err != nil {
		return nil, fmt.Errorf("migration %s: its journal: %w", name, err)
	}
	if j.Name != name {
		return nil, fmt.Errorf("migration %s: its journal %s names migration %q: it is not this migration's", name, store.MigrationJournalKey(name), j.Name)
	}
	return &j, nil
}

// save writes j, also when ctx ended (a step that ran is recorded).
func (j *Journal) save(ctx context.Context, loc *store.Location) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := loc.PutSealedJSON(sctx, store.MigrationJournalKey(j.Name), j); err != nil {
		return fmt.Errorf("migration %s: writing its journal: %w", j.Name, err)
	}
	return nil
}

// lastStage is the last finished stage, nil for none.
func (j *Journal) lastStage() *StageRecord {
	for i := len(j.Stages) - 1; i >= 0; i-- {
		if !j.Stages[i].Ended.IsZero() && j.Stages[i].Error == "" {
			return &j.Stages[i]
		}
	}
	return nil
}

// sameClusters checks that source and target (either may be nil: not
// reached) are the clusters of j's first stage, the same way round, and
// records them when j has none yet. A cluster whose ID cannot be read is
// not checked (its own error comes when it is used).
func (j *Journal) sameClusters(ctx context.Context, source, target *kube.Cluster) error {
	for _, c := range []struct {
		role    string
		cluster *kube.Cluster
		id      *string
	}{{"source", source, &j.SourceID}, {"target", target, &j.TargetID}} {
		if c.cluster == nil {
			continue
		}
		id, err := c.cluster.ID(ctx)
		if err != nil {
			continue
		}
		if *c.id == "" {
			*c.id = id
			continue
		}
		if id != *c.id {
			other := map[string]string{"source": j.TargetID, "target": j.SourceID}[c.role]
			hint := ""
			if id == other {
				hint = " (the source and the target are swapped)"
			}
			return fmt.Errorf("migration %s: the %s given, %s, is not the cluster its first stage used as %s%s", j.Name, c.role, c.cluster.Name, c.role, hint)
		}
	}
	return nil
}
