package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	enginemigration "github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// migrateOptions are migrate's: a backup create's flags for the source, a
// restore create's for the target, and the two clusters.
type migrateOptions struct {
	*globals
	selection                                backupFlags
	restore                                  restoreFlags
	crypt                                    cryptFlags
	images                                   imageModeFlags
	volumes                                  volumeFlags
	fromKubeconfig, fromContext              string
	toKubeconfig, toContext, name, reportDir string
	verify                                   bool
	hub                                      hubMigrate

	bspec v1alpha1.BackupSpec
	rspec v1alpha1.RestoreSpec
}

func newMigrateCmd(g *globals) *cobra.Command {
	o := &migrateOptions{globals: g, verify: true}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Back up the source cluster, restore into the target cluster, and summarize",
		Long: `migrate runs ferry backup create against the source cluster, then ferry restore
create against the target, through the backup storage location, and prints a summary.
The two clusters never talk to each other.

With --hub (or $FERRY_HUB_KUBECONFIG), migrate runs nothing here: it creates a Migration in the
hub (ferry hub), from --from-cluster to --to-cluster (the hub's Clusters: ferry hub cluster add),
through --storage, with the selection, restore, image and --verify flags in its spec; the hub
runs it. Flags a Migration cannot carry (kubeconfigs and contexts, encryption, volume helper
settings, --report-dir, ...) are refused. --wait follows it, printing each phase, and ends with
its counts, report location and exit code (0 Completed, 2 PartiallyFailed, 1 Failed).

Volume data moves through helper pods that run ferry's own image, which is not published yet:
build and push it from a clone with 'make image IMAGE=REGISTRY/ferry:TAG' to a registry both
clusters' nodes can pull from, and pass --helper-image REGISTRY/ferry:TAG.

A migrate that was interrupted (Ctrl-C, a kill, a lost machine) is resumed by running the same
command again, with the same --name: its committed backup is reused, and the restore finishes
what the interrupted run left (claims that hold the backup's data keep it; claims it never
reached are filled). A migrate interrupted during its backup cannot be resumed: remove that
backup with ferry backup delete NAME first.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.name, "name", "", "name of the backup and the restore (default migrate-<timestamp>)")
	fl.StringVar(&o.fromKubeconfig, "from-kubeconfig", "", "kubeconfig of the source cluster (default --kubeconfig)")
	fl.StringVar(&o.fromContext, "from-context", "", "context of the source cluster")
	fl.StringVar(&o.toKubeconfig, "to-kubeconfig", "", "kubeconfig of the target cluster (default --kubeconfig)")
	fl.StringVar(&o.toContext, "to-context", "", "context of the target cluster")
	fl.BoolVar(&o.verify, "verify", true, "after the restore, compare every backed-up object with the target and write a verification report (see ferry verify)")
	fl.StringVar(&o.reportDir, "report-dir", "", "directory for the verification's report.json and report.html (default $XDG_STATE_HOME/ferry/reports/<name>, or ~/.local/state/ferry/reports/<name>)")
	o.selection.register(cmd)
	o.restore.register(cmd, false)
	o.crypt.registerRecipients(cmd)
	o.crypt.registerIdentity(cmd)
	o.images.registerBackup(cmd)
	o.images.registerMappings(cmd, true)
	o.images.registerRestore(cmd, false)
	o.images.register(cmd, "image-concurrency")
	o.volumes.registerMigrate(cmd)
	o.hub.register(cmd)
	return cmd
}

// Complete fills in the defaults, builds both specs (reading the
// resource-modifiers file) and checks the identity and password files.
func (o *migrateOptions) Complete(cmd *cobra.Command, _ []string) error {
	if o.name == "" {
		o.name = defaultName("migrate")
	}
	if o.hub.complete(cmd, o.storage); o.hub.on() {
		return o.completeHub()
	}
	if o.fromKubeconfig == "" {
		o.fromKubeconfig = o.kubeconfig
	}
	if o.toKubeconfig == "" {
		o.toKubeconfig = o.kubeconfig
	}
	var err error
	if o.rspec, err = newRestoreSpec(&o.restore, o.name, &o.images, false); err != nil {
		return err
	}
	o.bspec = newBackupSpec(&o.selection, &o.crypt, &o.images, o.volumes.defaultToFS)
	if o.verify && !o.rspec.DryRun && o.reportDir == "" {
		o.reportDir = defaultReportDir(o.name)
	}
	if err := o.crypt.complete(); err != nil {
		return err
	}
	return o.volumes.complete()
}

func (o *migrateOptions) Validate() error {
	if err := o.hub.validate(); err != nil {
		return err
	}
	if err := backup.ValidateName(o.name); err != nil {
		return err
	}
	if err := o.images.checkPlatforms(false); err != nil {
		return err
	}
	if err := o.images.validate(); err != nil {
		return err
	}
	if err := (backup.Options{Name: o.name, Spec: o.bspec}).Validate(); err != nil {
		return err
	}
	ropts := o.restoreOptions(images.Options{})
	if err := ropts.Validate(); err != nil {
		return err
	}
	if o.hub.on() {
		return nil
	}
	if o.fromContext == "" && o.toContext == "" && o.fromKubeconfig == o.toKubeconfig {
		return fmt.Errorf("migrate needs two clusters: set --from-context and --to-context (or --from-kubeconfig and --to-kubeconfig)")
	}
	if err := o.crypt.validate(); err != nil {
		return err
	}
	if len(o.crypt.recipients) > 0 && o.crypt.identity == "" {
		return fmt.Errorf("migrate with --encryption-recipient needs --encryption-identity too, to read the backup back for the restore")
	}
	if o.fromKubeconfig == o.toKubeconfig && o.fromContext == o.toContext {
		return fmt.Errorf("--from-context and --to-context name the same cluster (%q); migrate moves between two clusters", o.fromContext)
	}
	return nil
}

// completeHub builds the specs of migrate --hub and the Migration's from
// them, unless a flag it refuses was set (then Validate says so, and no
// file such a flag names is read).
func (o *migrateOptions) completeHub() error {
	if len(o.hub.changed) > 0 {
		return nil
	}
	var err error
	if o.rspec, err = newRestoreSpec(&o.restore, o.name, &o.images, false); err != nil {
		return err
	}
	o.bspec = newBackupSpec(&o.selection, &o.crypt, &o.images, o.volumes.defaultToFS)
	o.hub.spec = o.hub.migrationSpec(o.bspec, o.rspec, o.storage, o.verify)
	return nil
}

// restoreOptions are the engine's options of the restore, but for the pod
// volumes.
func (o *migrateOptions) restoreOptions(iopts images.Options) restore.Options {
	return restore.Options{Name: o.name, Spec: o.rspec, Log: o.log, CRDTimeout: o.restore.crdTimeout, Images: iopts}
}

func (o *migrateOptions) Run(ctx context.Context) error {
	if o.hub.on() {
		return o.runHub(ctx)
	}
	defer func() {
		if ctx.Err() != nil {
			fmt.Fprintf(o.stderr, "migrate %s was interrupted: to resume it, run the same command again with --name %s (one interrupted during its backup needs `ferry backup delete %s` first)\n", o.name, o.name, o.name)
		}
	}()
	if o.verify && !o.rspec.DryRun {
		removeEmpty, err := checkReportDir(o.reportDir)
		if err != nil {
			return err
		}
		defer removeEmpty()
	}
	iopts, err := o.images.options()
	if err != nil {
		return err
	}
	loc, err := o.openStore(ctx, &o.crypt)
	if err != nil {
		return err
	}
	defer loc.Close()
	reused, err := enginemigration.Prepare(ctx, loc, o.name, o.bspec)
	if err != nil {
		return err
	}
	src, dst, err := o.connect(ctx)
	if err != nil {
		return err
	}
	b := reused
	if b != nil {
		fmt.Fprintf(o.stderr, "Resuming migration %s: backup %s (%s, %s) is reused, and the restore finishes what the interrupted run left\n", o.name, b.Name, b.Status.Phase, tsString(b.Status.CompletionTimestamp))
	} else if b, err = o.backup(ctx, loc, src, iopts); err != nil {
		return err
	}
	if o.volumes.toNodePodsDir != "" {
		o.volumes.nodePodsDir = o.volumes.toNodePodsDir
	}
	rpv, closeDst, err := o.volumes.restoreOptions(ctx, loc, dst, o.log)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer closeDst()
	ropts := o.restoreOptions(iopts)
	ropts.PodVolumes = rpv
	r, rres, err := runRestore(ctx, o.globals, dst, loc, ropts, &o.volumes)
	if err != nil {
		return err
	}
	if o.output == "table" {
		// The restore's summary shows whatever the verification does.
		vols, volErr := restoreVolumeRecords(ctx, loc, o.name)
		if err := o.printRestore(src, dst, loc, b, r, rres, vols, volErr); err != nil {
			return err
		}
	}
	// Only a dry run prints the restore's results; otherwise they are in
	// its results file, and the verification collects its own: not
	// holding both lists at once keeps a large migrate's peak memory down.
	var dryRun *report.Results
	if r.Spec.DryRun {
		dryRun = rres
	}
	rres = nil
	// The restore is checked against the backup, after its own expected
	// changes, unless it is a dry run or did not run.
	var m migration
	if o.verify && !r.Spec.DryRun && r.Status.Phase != "Failed" {
		m.verification, m.paths, m.verifyErr = o.verifyRestore(ctx, dst, loc, ropts, b, r)
	}
	if err := o.print(b, r, dryRun, &m); err != nil {
		return err
	}
	return migrateExit(o.name, b, r, &m)
}

// connect connects to the two clusters, which must differ.
func (o *migrateOptions) connect(ctx context.Context) (src, dst *kube.Cluster, err error) {
	if src, err = connect(ctx, o.fromKubeconfig, o.fromContext); err != nil {
		return nil, nil, fmt.Errorf("source: %w", err)
	}
	if dst, err = connect(ctx, o.toKubeconfig, o.toContext); err != nil {
		return nil, nil, fmt.Errorf("target: %w", err)
	}
	srcID, err1 := src.ID(ctx)
	dstID, err2 := dst.ID(ctx)
	if src.Config.Host == dst.Config.Host || (err1 == nil && err2 == nil && srcID == dstID) {
		return nil, nil, fmt.Errorf("source %s (%s) and target %s (%s) are the same cluster; migrate moves between two clusters", src.Name, src.Config.Host, dst.Name, dst.Config.Host)
	}
	return src, dst, nil
}

// backup backs up src and prints its summary (table output). A backup
// that partially failed still goes on to the restore.
func (o *migrateOptions) backup(ctx context.Context, loc *store.Location, src *kube.Cluster, iopts images.Options) (*v1alpha1.Backup, error) {
	pv, closeSrc, err := o.volumes.backupOptions(ctx, loc, src, o.log)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	b, res, err := runBackup(ctx, o.globals, src, loc, backup.Options{Name: o.name, Spec: o.bspec, Log: o.log, Images: iopts, PodVolumes: pv}, &o.volumes)
	closeSrc()
	if err != nil {
		return nil, err
	}
	if o.output == "table" {
		if err := printBackup(o.globals, b, res); err != nil {
			return nil, err
		}
	}
	if err := phaseExit(b.Status.Phase, "backup "+o.name); err != nil && b.Status.Phase != v1alpha1.PhasePartiallyFailed {
		return nil, err
	}
	return b, nil
}

// verifyRestore compares the target with the backup, after the restore's
// expected changes, with the backup's and the restore's timings.
func (o *migrateOptions) verifyRestore(ctx context.Context, dst *kube.Cluster, loc *store.Location, ropts restore.Options, b *v1alpha1.Backup, r *v1alpha1.Restore) (*report.Verification, reportPaths, error) {
	var timings []report.Timing
	if s, e := b.Status.StartTimestamp, b.Status.CompletionTimestamp; s != nil && e != nil {
		timings = append(timings, report.NewTiming("backup", s.Time, e.Time))
	}
	if s, e := r.Status.StartTimestamp, r.Status.CompletionTimestamp; s != nil && e != nil {
		timings = append(timings, report.NewTiming("restore", s.Time, e.Time))
	}
	ropts.OnProgress = nil
	v, paths, err := runVerify(ctx, o.globals, dst, loc, ropts, o.reportDir, timings...)
	if err != nil {
		err = fmt.Errorf("verification after the restore: %w", err)
	}
	return v, paths, err
}

// migration is what the verification after a migrate's restore found.
type migration struct {
	verification *report.Verification // nil when it did not run
	paths        reportPaths
	verifyErr    error
}

// printRestore prints the restore's summary and the migrate's (table
// output), before the verification runs.
func (o *migrateOptions) printRestore(src, dst *kube.Cluster, loc *store.Location, b *v1alpha1.Backup, r *v1alpha1.Restore, res *report.Results, vols []volumes.PodVolumeRestore, volErr error) error {
	if err := printRestore(o.globals, r, res); err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "Migrated %s -> %s through %s: %d items backed up; %d created, %d unchanged, %d skipped, %d failed\n",
		src.Name, dst.Name, loc.URL(), b.Status.Progress.ItemsBackedUp, r.Status.Counts.Created, r.Status.Counts.Unchanged, r.Status.Counts.Skipped, r.Status.Counts.Failed)
	printMigratedVolumes(o.stdout, o.name, vols, volErr)
	return nil
}

// print prints the whole migrate for -o json|yaml, or the verification's
// summary for table output.
func (o *migrateOptions) print(b *v1alpha1.Backup, r *v1alpha1.Restore, rres *report.Results, m *migration) error {
	if o.output == "table" {
		if m.verification != nil {
			printVerification(o.globals, m.verification, m.paths)
		}
		return nil
	}
	out := map[string]any{"backup": b, "restore": r}
	if r.Spec.DryRun {
		out["results"] = rres
	}
	if v := m.verification; v != nil {
		out["verification"] = map[string]any{"summary": v.Summary, "differences": v.Differences, "timings": v.Timings, "report": m.paths}
	}
	if m.verifyErr != nil {
		out["verificationError"] = m.verifyErr.Error()
	}
	return printObject(o.stdout, o.output, out)
}

// migrateExit is the exit code error of a migrate: a verification that
// could not run; else the worse of the two phases; then the
// verification's differences.
func migrateExit(name string, b *v1alpha1.Backup, r *v1alpha1.Restore, m *migration) error {
	if m.verifyErr != nil {
		return m.verifyErr
	}
	if r.Status.Phase == v1alpha1.PhaseFailed || b.Status.Phase == v1alpha1.PhaseCompleted {
		if err := phaseExit(r.Status.Phase, "restore "+name); err != nil {
			return err
		}
	} else {
		return phaseExit(b.Status.Phase, "backup "+name)
	}
	if m.verification != nil {
		return verifyExit(m.verification)
	}
	return nil
}
