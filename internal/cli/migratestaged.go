package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	enginemigration "github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
)

// stagedOptions are those of migrate stage|cutover|rollback NAME:
// migrate's, the name as the argument, and the cutover's and rollback's
// own.
type stagedOptions struct {
	migrateOptions
	op             string
	maxDowntime    time.Duration
	maxStages      int
	quiesceTimeout time.Duration
	deleteTarget   bool
	skipTarget     bool
	maxStagesSet   bool
}

var stagedLong = map[string]string{
	"stage": `stage copies the data of every claim in the selected namespaces into the target's
claims while the source's applications run: an incremental snapshot of each claim, written
into a claim of the same name in the target (created by the first stage, with the
storage-class mapping). Later stages write only the files that changed since the last one
and remove the files the source removed. No workload is created in the target.

The first stage fixes the migration's selection and restore flags (--include-namespaces is
required: a cutover scales the workloads of those namespaces to zero); later stages and the
cutover use them. Each stage prints, per claim, the bytes scanned, changed and uploaded, and
the files that vanished while they were read (a live application's; they never fail a
stage), then the predicted downtime of a cutover now. The migration's journal is kept in the
location (migrations/NAME/journal.json).`,
	"cutover": `cutover ends a staged migration: it prints the predicted downtime, records the
replica counts of the source's Deployments, StatefulSets and ReplicaSets and the suspension
of its CronJobs in the journal, scales them to zero and suspends the CronJobs, waits until
their pods are gone, then migrates: the final delta of every claim, the resources (the
workloads at their recorded counts), and the verification, which waits until the target's
workloads run. It prints the actual downtime (the first source workload scaled down -> the
target's workloads running) beside the prediction.

With --max-downtime D it first runs more stages until the prediction is under D (at most
--max-stages of them); a prediction that stops shrinking ends it before the source is touched.
A cutover that was killed is finished by running it again, or undone by ferry migrate
rollback NAME.`,
	"rollback": `rollback undoes a staged migration's cutover, at any step, also one that was
killed or failed halfway: the target's copies of the quiesced workloads are scaled to zero
(or deleted, with --delete-target), then the source's are scaled back to the replica counts
the journal recorded and its CronJobs get their suspension back. Stages may run again after
it.`,
	"done": `done declares a staged migration finished once its cutover has: from then on no stage,
cutover or rollback runs under its name. It only writes the journal in the location; neither
cluster is reached.`,
}

func newMigrateStagedCmd(g *globals, op string) *cobra.Command {
	o := &stagedOptions{migrateOptions: migrateOptions{globals: g, verify: true}, op: op}
	cmd := &cobra.Command{
		Use: op + " NAME",
		Short: map[string]string{"stage": "Copy the claims' data into the target while the source runs", "cutover": "Quiesce the source, move the final delta and the resources, and report the downtime", "rollback": "Put the source back at its recorded replica counts after a cutover",
			"done": "Declare a staged migration finished: no rollback is offered after it"}[op],
		Long: stagedLong[op],
		Args: cobra.ExactArgs(1),
		RunE: runE(o),
	}
	if op == "done" {
		o.crypt.registerIdentity(cmd) // the journal is sealed in an encrypted location
		return cmd
	}
	o.registerFlags(cmd)
	fl := cmd.Flags()
	switch op {
	case "cutover":
		fl.DurationVar(&o.maxDowntime, "max-downtime", 0, "run more stages until the predicted downtime is under this, then cut over (0: cut over now)")
		fl.IntVar(&o.maxStages, "max-stages", 5, "with --max-downtime, the most stages the cutover runs to get under it")
		fl.DurationVar(&o.quiesceTimeout, "quiesce-timeout", 5*time.Minute, "how long to wait for the source's pods to be gone after the quiesce")
	case "rollback":
		fl.BoolVar(&o.deleteTarget, "delete-target", false, "delete the target's copies of the quiesced workloads instead of scaling them to zero")
		fl.BoolVar(&o.skipTarget, "skip-unreachable-target", false, "put the source back even when the target cannot be reached (its copies of the workloads may still run)")
	}
	return cmd
}

func (o *stagedOptions) Complete(cmd *cobra.Command, args []string) error {
	o.name = args[0]
	if o.name == "" {
		return fmt.Errorf("migrate %s: NAME is empty", o.op)
	}
	o.maxStagesSet = cmd.Flags().Changed("max-stages")
	if o.op == "done" {
		return o.crypt.complete()
	}
	return o.migrateOptions.Complete(cmd, nil)
}

func (o *stagedOptions) Validate() error {
	// The stages and cutovers are backups and restores named after it.
	if err := enginemigration.ValidateStagedName(o.name); err != nil {
		return err
	}
	if o.op == "done" {
		return nil
	}
	if o.rspec.DryRun {
		return fmt.Errorf("--dry-run: migrate %s changes the clusters; plan a migration with ferry migrate --dry-run", o.op)
	}
	if o.op != "rollback" {
		// Refused before a cluster is reached: what no stage takes, and
		// a repository password that cannot be read (every claim's data
		// moves through the volume repository).
		if err := enginemigration.CheckStagedSpecs(o.bspec, o.rspec); err != nil {
			return err
		}
		if o.volumes.hostPodsDir == "" {
			if _, err := readPassword(o.volumes.passwordFile); err != nil {
				return fmt.Errorf("migrate %s moves every claim's data through the volume repository: %w", o.op, err)
			}
		}
	}
	if o.hub.on() {
		return fmt.Errorf("migrate %s runs here; a hub Migration is not staged yet (unset $%s)", o.op, EnvHubKubeconfig)
	}
	if o.op == "cutover" {
		switch {
		case !o.verify:
			return fmt.Errorf("--verify=false: a cutover verifies, since its downtime ends when the verification sees the target's workloads run")
		case o.maxDowntime < 0:
			return fmt.Errorf("--max-downtime %s: must not be negative", o.maxDowntime)
		case o.maxStages < 1:
			return fmt.Errorf("--max-stages %d: must be at least 1", o.maxStages)
		case o.maxStagesSet && o.maxDowntime == 0:
			return fmt.Errorf("--max-stages bounds the stages that --max-downtime runs: give --max-downtime too")
		case o.quiesceTimeout <= 0:
			return fmt.Errorf("--quiesce-timeout %s: must be positive", o.quiesceTimeout)
		}
	}
	return o.migrateOptions.Validate()
}

func (o *stagedOptions) Run(ctx context.Context) error {
	loc, err := o.openStore(ctx, &o.crypt)
	if err != nil {
		return err
	}
	defer loc.Close()
	if o.op == "done" {
		j, err := enginemigration.Finish(ctx, loc, o.name)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.stdout, "Migration %s declared done at %s: no rollback is offered from now on\n", j.Name, j.Finished.Format(time.RFC3339))
		return nil
	}
	if o.op != "stage" {
		// A cutover or rollback of a migration that never staged says so
		// before any cluster is reached.
		if _, err := enginemigration.LoadJournal(ctx, loc, o.name); err != nil {
			return err
		}
	}
	if o.op == "rollback" {
		return o.rollback(ctx, loc)
	}
	src, dst, err := o.connect(ctx)
	if err != nil {
		return err
	}
	iopts, err := o.images.options()
	if err != nil {
		return err
	}
	mo, closeVolumes, err := o.migrationOptions(ctx, loc, src, dst, iopts)
	if err != nil {
		return err
	}
	defer closeVolumes()
	// Stages print a line each, not a migrate's tables, and the source's
	// helpers stay for the stages a cutover may add.
	mo.OnBackup = func(b *v1alpha1.Backup, _ *report.Results, _ bool) {
		fmt.Fprintf(o.stderr, "backup %s: %s, %d items\n", b.Name, b.Status.Phase, b.Status.Progress.ItemsBackedUp)
	}
	mo.OnRestore = func(r *v1alpha1.Restore, _ *report.Results) {
		fmt.Fprintf(o.stderr, "restore %s: %s\n", r.Name, r.Status.Phase)
	}
	if o.op == "stage" {
		began := time.Now()
		j, err := enginemigration.Stage(ctx, mo)
		// Only a stage this run began is printed, not a refused run's
		// last stage.
		if j != nil && len(j.Stages) > 0 && !j.Stages[len(j.Stages)-1].Started.Before(began) {
			printStage(o.stdout, j.Stages[len(j.Stages)-1])
			if p, perr := enginemigration.Predict(j, time.Now()); perr == nil && err == nil {
				fmt.Fprintln(o.stdout, p.String())
			}
		}
		return err
	}
	return o.cutover(ctx, mo)
}

// rollback puts the source back, also when the target cannot be
// reached (then it says so, and the journal keeps the cutover for a
// rollback run again).
func (o *stagedOptions) rollback(ctx context.Context, loc *store.Location) error {
	src, err := connect(ctx, o.fromKubeconfig, o.fromContext)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	dst, err := connect(ctx, o.toKubeconfig, o.toContext)
	switch {
	case err != nil && !o.skipTarget:
		return fmt.Errorf("target: %w (nothing was rolled back; --skip-unreachable-target puts the source back without it)", err)
	case err != nil:
		fmt.Fprintf(o.stderr, "target: %v: the source is put back; the target's copies are left as they are\n", err)
		dst = nil
	}
	j, err := enginemigration.Rollback(ctx, enginemigration.Options{Name: o.name, Source: src, Target: dst, Location: loc, Log: o.log},
		enginemigration.RollbackOptions{DeleteTarget: o.deleteTarget})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "Migration %s rolled back: the source runs at its recorded replica counts again; the target's copies are %s\n", j.Name, map[bool]string{true: "deleted", false: "scaled to zero"}[o.deleteTarget])
	return nil
}

// cutover runs the cutover and prints its prediction, its migration's
// summary and its downtime.
func (o *stagedOptions) cutover(ctx context.Context, mo enginemigration.Options) error {
	co := enginemigration.CutoverOptions{MaxDowntime: o.maxDowntime, MaxStages: o.maxStages, QuiesceTimeout: o.quiesceTimeout,
		OnPrediction: func(p enginemigration.Prediction) { fmt.Fprintln(o.stdout, p.String()) }}
	res, j, err := enginemigration.Cutover(ctx, mo, co)
	if err != nil && !errors.Is(err, enginemigration.ErrVerification) {
		if j != nil && j.Finished == nil && j.Cutover != nil && (j.Cutover.Step == enginemigration.CutoverQuiescing || j.Cutover.Step == enginemigration.CutoverQuiesced) {
			err = fmt.Errorf("%w\nthe cutover stopped at step %s: run it again to finish it, or ferry migrate rollback %s", err, j.Cutover.Step, o.name)
		}
		return err
	}
	m := &migration{verifyErr: err}
	if m.verification = res.Verification; m.verification != nil {
		if m.paths.JSON, m.paths.HTML, err = m.verification.WriteFiles(o.reportDir); err != nil {
			return err
		}
		jsonKey, htmlKey := enginemigration.ReportKeys(j.Cutover.Name)
		m.stored = storedReport{Location: mo.Location.URL(), JSON: jsonKey, HTML: htmlKey}
	}
	if err := o.print(res.Backup, res.Restore, res.RestoreResults, m); err != nil {
		return err
	}
	if c := j.Cutover; c != nil && c.Step != enginemigration.CutoverDone {
		code := ExitPartiallyFailed
		if c.Phase == v1alpha1.PhaseFailed {
			code = ExitFailed
		}
		return &exitError{code: code, msg: fmt.Sprintf("the cutover of migration %s is not done (step %s): %s; the source is quiesced: run ferry migrate cutover %s again once the cause is fixed, or ferry migrate rollback %s", o.name, c.Step, c.Error, o.name, o.name)}
	}
	if c := j.Cutover; c != nil && c.Step == enginemigration.CutoverDone {
		fmt.Fprintf(o.stdout, "Downtime: %s (predicted %s). Until ferry migrate done %s, ferry migrate rollback %s puts the source back (what the target wrote since is not moved back)\n", c.Downtime.Round(time.Second), c.Prediction.Total.Round(time.Second), o.name, o.name)
	}
	return migrateExit(o.name, res, m)
}

// printStage prints one stage's claims.
func printStage(w io.Writer, s enginemigration.StageRecord) {
	fmt.Fprintf(w, "Stage %d (%s) took %s\n", s.Number, s.Name, s.Duration().Round(100*time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIM\tSCANNED\tCHANGED\tFILES\tUPLOADED\tREMOVED\tVANISHED\tDURATION\tERROR")
	for _, c := range s.Claims {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\n", c.Claim, humanBytes(c.ScannedBytes), humanBytes(c.ChangedBytes), c.ChangedFiles,
			humanBytes(c.UploadedBytes), c.Removed, c.Vanished, (c.Snapshot + c.Write).Round(100*time.Millisecond), c.Error)
	}
	_ = tw.Flush()
	for _, c := range s.Claims {
		if c.Vanished > 0 {
			fmt.Fprintf(w, "claim %s: %d file(s) vanished while read (a live application's; left out of this stage, not an error): %s\n", c.Claim, c.Vanished, strings.Join(c.VanishedPaths, ", "))
		}
	}
	if s.Error != "" {
		fmt.Fprintf(w, "Stage %d failed: %s\n", s.Number, s.Error)
	}
}
