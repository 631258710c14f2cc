package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

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
	selection                                 backupFlags
	restore                                   restoreFlags
	crypt                                     cryptFlags
	images                                    imageModeFlags
	volumes                                   volumeFlags
	fromKubeconfig, fromContext               string
	toKubeconfig, toContext, name, reportDir  string
	verify, preflight, pullProbe, volumeProbe bool
	hub                                       hubMigrate
	deadlines                                 stepDeadlines

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
runs it; --encryption-identity is stored in the hub as the Credential NAME-encryption-identity.
Flags a Migration cannot carry (kubeconfigs and contexts, volume helper settings, --report-dir,
...) are refused. --wait follows it, printing each phase, and ends with
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
	cmd.Flags().StringVar(&o.name, "name", "", "name of the backup and the restore (default migrate-<timestamp>)")
	cmd.Flags().BoolVar(&o.preflight, "preflight", false, "check the migration without running it: read the source and the target, write nothing to either or to the location but its probes (removed when it ends), and list the risks (blockers, warnings, notes), each with the objects, what will happen and the fix, with a time estimate; keeps preflight.json and preflight.html in --report-dir; exit 2 when a risk is a blocker. With --hub, a Migration of spec.preflightOnly: the hub runs the check, and status.preflight holds the risks")
	cmd.Flags().BoolVar(&o.pullProbe, "preflight-pull-probe", false, "with --preflight: also have the target's nodes pull every image the workloads name, from a probe pod each in the target (told to run a path no image has, so no code of the image runs; removed when it ends), with the pods' pull Secrets (copies of the move's, removed too)")
	cmd.Flags().BoolVar(&o.volumeProbe, "preflight-volume-probe", true, "with --preflight, when helper pods move volume data: measure each volume's used bytes (the kubelet's statistics, else a sizing helper pod) and the data path (a probe pod in each cluster uploads and downloads 128 MiB through the location, under preflight-probes/, removed after) for the time estimate, and check the repository password; false leaves the volume data out of the estimate")
	o.registerFlags(cmd)
	o.hub.register(cmd)
	cmd.AddCommand(newMigrateStagedCmd(g, "stage"), newMigrateStagedCmd(g, "cutover"), newMigrateStagedCmd(g, "rollback"), newMigrateStagedCmd(g, "done"))
	return cmd
}

// registerFlags registers migrate's flags but --name and the hub's (those
// of its staged subcommands too).
func (o *migrateOptions) registerFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
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
	o.deadlines.register(fl, true)
}

// Complete fills in the defaults, builds both specs (reading the
// resource-modifiers file) and checks the identity and password files.
func (o *migrateOptions) Complete(cmd *cobra.Command, _ []string) error {
	if o.name == "" {
		o.name = defaultName("migrate")
	}
	if o.hub.complete(cmd, o.storage); o.hub.on() {
		return o.completeHub(cmd)
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
	if (o.preflight || o.verify && !o.rspec.DryRun) && o.reportDir == "" {
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
	if err := o.deadlines.validate(); err != nil {
		return err
	}
	if err := o.validatePreflight(); err != nil {
		return err
	}
	if err := enginemigration.ValidateName(o.name); err != nil {
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
	if err := o.crypt.validate(); err != nil {
		return err
	}
	if len(o.crypt.recipients) > 0 && o.crypt.identity == "" && !o.preflight {
		return fmt.Errorf("migrate with --encryption-recipient needs --encryption-identity too, to read the backup back for the restore")
	}
	if o.hub.on() {
		return nil
	}
	if o.fromContext == "" && o.toContext == "" && o.fromKubeconfig == o.toKubeconfig {
		return fmt.Errorf("migrate needs two clusters: set --from-context and --to-context (or --from-kubeconfig and --to-kubeconfig)")
	}
	if o.fromKubeconfig == o.toKubeconfig && o.fromContext == o.toContext {
		return fmt.Errorf("--from-context and --to-context name the same cluster (%q); migrate moves between two clusters", o.fromContext)
	}
	return nil
}

// completeHub builds the specs of migrate --hub and the Migration's from
// them, unless a flag it refuses was set (then Validate says so, and no
// file such a flag names is read).
func (o *migrateOptions) completeHub(cmd *cobra.Command) error {
	if len(o.hub.changed) > 0 {
		return nil
	}
	var err error
	if o.rspec, err = newRestoreSpec(&o.restore, o.name, &o.images, false); err != nil {
		return err
	}
	o.bspec = newBackupSpec(&o.selection, &o.crypt, &o.images, o.volumes.defaultToFS)
	var crdTimeout time.Duration
	if cmd.Flags().Changed("crd-timeout") {
		crdTimeout = o.restore.crdTimeout
	}
	o.hub.spec = o.hub.migrationSpec(o.bspec, o.rspec, o.storage, o.verify, crdTimeout)
	o.hub.spec.Timeouts = o.deadlines.migrationTimeouts()
	o.hub.spec.PreflightOnly = o.preflight
	o.hub.encrypt(o.name, &o.crypt)
	if o.crypt.identity != "" {
		if err := o.crypt.complete(); err != nil {
			return err
		}
		if o.hub.identity, err = os.ReadFile(o.crypt.identity); err != nil {
			return fmt.Errorf("--encryption-identity: %w", err)
		}
	}
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
	if o.preflight {
		return o.runPreflight(ctx)
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
	src, dst, err := o.connect(ctx)
	if err != nil {
		return err
	}
	mo, closeVolumes, err := o.migrationOptions(ctx, loc, src, dst, iopts)
	if err != nil {
		return err
	}
	defer closeVolumes()
	if o.verify {
		mo.Estimate = o.priorEstimate(src.Config.Host, dst.Config.Host)
	}
	p := &migrateProgress{o: o}
	p.hook(&mo)
	res, err := enginemigration.Run(ctx, mo)
	p.stop()
	if err != nil && !errors.Is(err, enginemigration.ErrVerification) {
		return err
	}
	m := &migration{verifyErr: err}
	if m.verification = res.Verification; m.verification != nil {
		if m.paths.JSON, m.paths.HTML, err = m.verification.WriteFiles(o.reportDir); err != nil {
			return err
		}
		jsonKey, htmlKey := enginemigration.ReportKeys(o.name)
		m.stored = storedReport{Location: loc.URL(), JSON: jsonKey, HTML: htmlKey}
	}
	if err := o.print(res.Backup, res.Restore, res.RestoreResults, m); err != nil {
		return err
	}
	return migrateExit(o.name, res, m)
}

// connect connects to the two clusters, which must differ
// (migration.CheckClusters, before anything is written).
func (o *migrateOptions) connect(ctx context.Context) (src, dst *kube.Cluster, err error) {
	if src, err = connect(ctx, o.fromKubeconfig, o.fromContext); err != nil {
		return nil, nil, fmt.Errorf("source: %w", err)
	}
	if dst, err = connect(ctx, o.toKubeconfig, o.toContext); err != nil {
		return nil, nil, fmt.Errorf("target: %w", err)
	}
	return src, dst, enginemigration.CheckClusters(ctx, src, dst)
}

// migrationOptions are the engine's options of this migrate: the specs,
// the images, and the pod volumes through helper pods in both clusters.
// The source's helpers are removed once the backup ended; closeVolumes
// removes whatever is left.
func (o *migrateOptions) migrationOptions(ctx context.Context, loc *store.Location, src, dst *kube.Cluster, iopts images.Options) (mo enginemigration.Options, closeVolumes func(), err error) {
	bpv, closeSrc, err := o.volumes.backupOptions(ctx, loc, src, o.log)
	if err != nil {
		return mo, nil, fmt.Errorf("source: %w", err)
	}
	var once sync.Once
	closeB := func() { once.Do(closeSrc) }
	if o.volumes.toNodePodsDir != "" {
		o.volumes.nodePodsDir = o.volumes.toNodePodsDir
	}
	rpv, closeDst, err := o.volumes.restoreOptions(ctx, loc, dst, o.log)
	if err != nil {
		closeB()
		return mo, nil, fmt.Errorf("target: %w", err)
	}
	ropts := o.restoreOptions(iopts)
	ropts.PodVolumes = rpv
	mo = enginemigration.Options{Name: o.name, Source: src, Target: dst, Location: loc, Verify: o.verify, Resume: true, Log: o.log,
		Backup:  backup.Options{Spec: o.bspec, Log: o.log, Images: iopts, PodVolumes: bpv, Deadline: o.deadlines.backupDeadline()},
		Restore: ropts,
	}
	mo.Restore.Deadline, mo.Restore.VerifyDeadline = o.deadlines.restoreDeadline(), o.deadlines.verifyDeadline()
	var backedUp *v1alpha1.Backup
	mo.OnBackup = func(b *v1alpha1.Backup, res *report.Results, reused bool) {
		backedUp = b
		closeB()
		o.printBackupStep(b, res, reused)
	}
	mo.OnRestore = func(r *v1alpha1.Restore, res *report.Results) {
		o.printRestoreStep(ctx, src, dst, loc, backedUp, r, res)
	}
	return mo, func() { closeB(); closeDst() }, nil
}

// printBackupStep prints the backup's summary (table output), or that a
// resumed migration reuses it.
func (o *migrateOptions) printBackupStep(b *v1alpha1.Backup, res *report.Results, reused bool) {
	if reused {
		fmt.Fprintf(o.stderr, "Resuming migration %s: backup %s (%s, %s) is reused, and the restore finishes what the interrupted run left\n", o.name, b.Name, b.Status.Phase, tsString(b.Status.CompletionTimestamp))
		return
	}
	if o.output == "table" {
		if err := printBackup(o.globals, b, res); err != nil {
			fmt.Fprintf(o.stderr, "printing backup %s: %v\n", b.Name, err)
		}
	}
}

// migration is what the verification after a migrate's restore found.
type migration struct {
	verification *report.Verification // nil when it did not run
	paths        reportPaths
	// stored is where the location keeps the report, as the hub's
	// Migrations have it (migration.ReportKeys).
	stored    storedReport
	verifyErr error
}

// storedReport is where a location keeps a migration's report: its keys
// in the location.
type storedReport struct {
	Location string `json:"location"`
	JSON     string `json:"json"`
	HTML     string `json:"html"`
}

// printRestoreStep prints the restore's summary and the migrate's (table
// output), before the verification runs.
func (o *migrateOptions) printRestoreStep(ctx context.Context, src, dst *kube.Cluster, loc *store.Location, b *v1alpha1.Backup, r *v1alpha1.Restore, res *report.Results) {
	if o.output != "table" {
		return
	}
	// The restore's phase is the migrate's exit code's business.
	_ = printRestore(o.globals, r, res)
	fmt.Fprintf(o.stdout, "Migrated %s -> %s through %s: %d items backed up; %d created, %d unchanged, %d skipped, %d failed\n",
		src.Name, dst.Name, loc.URL(), b.Status.Progress.ItemsBackedUp, r.Status.Counts.Created, r.Status.Counts.Unchanged, r.Status.Counts.Skipped, r.Status.Counts.Failed)
	vols, volErr := restoreVolumeRecords(ctx, loc, o.name)
	printMigratedVolumes(o.stdout, o.name, vols, volErr)
}

// print prints the whole migrate for -o json|yaml, or the verification's
// summary for table output.
func (o *migrateOptions) print(b *v1alpha1.Backup, r *v1alpha1.Restore, rres *report.Results, m *migration) error {
	if o.output == "table" {
		if m.verification != nil {
			printVerification(o.globals, m.verification, m.paths)
			fmt.Fprintf(o.stdout, "Report kept in the location %s: %s, %s\n", m.stored.Location, m.stored.HTML, m.stored.JSON)
		}
		return nil
	}
	out := map[string]any{"backup": b}
	if r != nil {
		out["restore"] = r
		if r.Spec.DryRun {
			out["results"] = rres
		}
	}
	if v := m.verification; v != nil {
		out["verification"] = map[string]any{"summary": v.Summary, "differences": v.Differences, "timings": v.Timings, "report": m.paths, "storedReport": m.stored}
	}
	if m.verifyErr != nil {
		out["verificationError"] = m.verifyErr.Error()
	}
	return printObject(o.stdout, o.output, out)
}

// migrateExit is the exit code of a migrate: a verification that could
// not run is an error; otherwise the migration's outcome
// (migration.Result.Outcome, the hub's too): 0 Completed, 2
// PartiallyFailed, 1 Failed.
func migrateExit(name string, res *enginemigration.Result, m *migration) error {
	if m.verifyErr != nil {
		return m.verifyErr
	}
	phase, reason, msg := res.Outcome()
	msg = fmt.Sprintf("migration %s %s (%s): %s", name, phase, reason, msg)
	switch phase {
	case v1alpha1.PhaseCompleted:
		return nil
	case v1alpha1.PhasePartiallyFailed:
		return &exitError{code: ExitPartiallyFailed, msg: msg}
	default:
		return &exitError{code: ExitFailed, msg: msg}
	}
}

// migrateProgress shows a migrate's progress bars on stderr (when it is a
// terminal), a step at a time: the backup's items and volume data, then
// the restore's, then the verification's.
type migrateProgress struct {
	o    *migrateOptions
	mu   sync.Mutex
	bar  *progress
	data *dataProgress
	// dataIn are the steps that move volume data here, which get a bar of
	// it.
	dataIn map[enginemigration.Step]bool
}

// hook makes the steps and the progress of mo's run drive the bars, which
// end before mo's OnBackup and OnRestore print.
func (p *migrateProgress) hook(mo *enginemigration.Options) {
	p.bar, p.data = &progress{}, &dataProgress{}
	mo.OnStep = p.step
	if onBackup := mo.OnBackup; onBackup != nil {
		mo.OnBackup = func(b *v1alpha1.Backup, res *report.Results, reused bool) { p.stop(); onBackup(b, res, reused) }
	}
	if onRestore := mo.OnRestore; onRestore != nil {
		mo.OnRestore = func(r *v1alpha1.Restore, res *report.Results) { p.stop(); onRestore(r, res) }
	}
	update := func(done, total int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.bar.update(done, total)
	}
	mo.Backup.OnProgress, mo.Restore.OnProgress, mo.OnVerifyProgress = update, update, update
	data := func(t volumes.Totals) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.data.update(t)
	}
	p.dataIn = map[enginemigration.Step]bool{}
	if pv := mo.Backup.PodVolumes; pv != nil && pv.Repository != nil {
		pv.OnProgress = data
		p.dataIn[enginemigration.StepBackup] = true
	}
	if pv := mo.Restore.PodVolumes; pv != nil && !pv.ByNodeAgent {
		pv.OnProgress = data
		p.dataIn[enginemigration.StepRestore] = true
	}
}

// step ends the bars of the step before, and starts those of s (Images
// and Volumes are stages of the backup, on its bars).
func (p *migrateProgress) step(s enginemigration.Step) {
	var name string
	switch s {
	case enginemigration.StepBackup:
		name = "backup "
	case enginemigration.StepRestore:
		name = "restore "
	case enginemigration.StepVerify:
		name = "verify "
	default:
		return
	}
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bar = newProgress(p.o.stderr, name+p.o.name)
	if p.dataIn[s] {
		p.data = p.bar.dataBar("volume data")
		p.o.volumes.showVolumes(p.data)
	}
}

// stop ends the bars shown.
func (p *migrateProgress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.data.stop()
	p.bar.stop()
	p.bar, p.data = &progress{}, &dataProgress{}
}
