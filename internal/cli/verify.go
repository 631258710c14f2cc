package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/kube"
	enginemigration "github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
)

// verifyOptions are verify's.
type verifyOptions struct {
	*globals
	restore                                                     restoreFlags
	crypt                                                       cryptFlags
	volumes                                                     volumeFlags
	backupName, restoreName, toKubeconfig, toContext, reportDir string
	fromVelero                                                  bool

	// restoreFlagsSet are the restore flags given, which --restore
	// refuses; spec is theirs, when --restore is not given.
	restoreFlagsSet []string
	// runtimeFlagsSet are the --verify-runtime flags given, which apply
	// with --restore too.
	runtimeFlagsSet []string
	spec            v1alpha1.RestoreSpec
}

// verifyRestoreFlags are the flags that give expected changes, which a
// restore's own spec gives with --restore.
var verifyRestoreFlags = []string{"namespace-mappings", "storage-class-mappings", "resource-modifiers", "from-cloud", "to-cloud",
	"include-namespaces", "exclude-namespaces", "include-resources", "exclude-resources"}

func newVerifyCmd(g *globals) *cobra.Command {
	o := &verifyOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "verify --backup BACKUP [--restore RESTORE | restore flags]",
		Short: "Compare a backup with the target cluster and write a verification report",
		Long: `verify compares every object of a backup with the target cluster, after the
changes a restore makes on purpose (sanitizing, namespace and storage-class
mappings, cloud profiles, resource modifiers), and lists every unexpected
difference. Then it checks that the move runs: it waits for the restored
workloads to be healthy and names why one is not, walks each claim the
restore wrote in a helper pod (--helper-image) and compares it with what
the restore wrote, and resolves every image the workloads name
(--verify-runtime=false leaves this out). It writes report.json and a
self-contained report.html into --report-dir, and writes nothing to the
store.

The expected changes come from --restore NAME (the spec of a restore that
ran), or else from the same flags as restore create. Exit code 0 means the
target matches the backup and runs, 2 that there are unexpected
differences (or objects that could not be read) or a workload, claim or
image that fails its runtime check, 1 that the verification could not run.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.backupName, "backup", "", "the backup to compare the target with (required)")
	fl.StringVar(&o.restoreName, "restore", "", "take the expected changes from this restore's spec (mappings, cloud profiles, modifiers, filters)")
	fl.BoolVar(&o.fromVelero, "from-velero-backup", false, "the backup is a Velero backup in the store")
	fl.StringVar(&o.toKubeconfig, "to-kubeconfig", "", "kubeconfig of the target cluster (default --kubeconfig)")
	fl.StringVar(&o.toContext, "to-context", "", "context of the target cluster (default --context)")
	fl.StringVar(&o.reportDir, "report-dir", "", "directory for report.json and report.html (default $XDG_STATE_HOME/ferry/reports/<backup>, or ~/.local/state/ferry/reports/<backup>)")
	o.restore.register(cmd, true)
	for _, n := range []string{"existing-resource-policy", "existing-volume-data-policy", "preserve-nodeports", "restore-status", "dry-run", "crd-timeout"} {
		_ = fl.MarkHidden(n) // restore create's, meaningless for a comparison
	}
	o.crypt.registerIdentity(cmd)
	o.volumes.registerHelpers(cmd) // the helper pods that walk the restored claims
	return cmd
}

// Complete fills in the defaults, checks the identity file and, without
// --restore, builds the expected changes from the restore flags (reading
// the resource-modifiers file).
func (o *verifyOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.restoreFlagsSet = changedFlags(cmd, verifyRestoreFlags...)
	o.runtimeFlagsSet = changedFlags(cmd, "verify-runtime", "verify-runtime-timeout")
	if o.toKubeconfig == "" {
		o.toKubeconfig = o.kubeconfig
	}
	if o.toContext == "" {
		o.toContext = o.context
	}
	if o.reportDir == "" && o.backupName != "" {
		o.reportDir = defaultReportDir(o.backupName)
	}
	if err := o.crypt.complete(); err != nil {
		return err
	}
	if o.restoreName != "" || o.backupName == "" {
		return nil
	}
	var err error
	o.spec, err = newRestoreSpec(&o.restore, o.backupName, nil, o.fromVelero)
	return err
}

func (o *verifyOptions) Validate() error {
	if o.backupName == "" {
		return fmt.Errorf("--backup is required")
	}
	if o.restoreName == "" {
		// The restore flags give the expected changes: checked as a
		// restore would check them, before anything connects.
		return (&restore.Options{Name: "verify-" + o.backupName, Spec: o.spec}).Validate()
	}
	if len(o.restoreFlagsSet) > 0 {
		return fmt.Errorf("--restore %s gives the expected changes; do not combine it with restore flags", o.restoreName)
	}
	if o.restore.verifyRuntimeTimeout < 0 {
		return fmt.Errorf("--verify-runtime-timeout %s: must not be negative", o.restore.verifyRuntimeTimeout)
	}
	if o.fromVelero {
		return fmt.Errorf("--restore %s gives the backup's kind; do not combine it with --from-velero-backup", o.restoreName)
	}
	return nil
}

func (o *verifyOptions) Run(ctx context.Context) error {
	loc, err := o.openStore(ctx, &o.crypt)
	if err != nil {
		return err
	}
	defer loc.Close()
	opts := restore.Options{Name: "verify-" + o.backupName, Log: o.log, Spec: o.spec}
	var restoreTiming []report.Timing
	if o.restoreName != "" {
		r, err := loc.GetRestore(ctx, o.restoreName)
		if err != nil {
			return fmt.Errorf("--restore %s: %w", o.restoreName, err)
		}
		if s, e := r.Status.StartTimestamp, r.Status.CompletionTimestamp; s != nil && e != nil {
			restoreTiming = []report.Timing{report.NewTiming("restore", s.Time, e.Time)}
		}
		if r.Spec.BackupName != o.backupName {
			return fmt.Errorf("restore %s restored backup %q, not %q", o.restoreName, r.Spec.BackupName, o.backupName)
		}
		opts.Name, opts.Spec = o.restoreName, r.Spec
		opts.Spec.DryRun = false
		if len(o.runtimeFlagsSet) > 0 {
			// The flags given override the restore's spec.verifyRuntime;
			// a timeout alone keeps its skip.
			rt := o.restore.runtimeVerification()
			if prev := opts.Spec.VerifyRuntime; prev != nil && prev.Skip && !slices.Contains(o.runtimeFlagsSet, "verify-runtime") {
				rt = prev
			}
			opts.Spec.VerifyRuntime = rt
		}
	}
	removeEmpty, err := checkReportDir(o.reportDir)
	if err != nil {
		return err
	}
	defer removeEmpty()
	cluster, err := connect(ctx, o.toKubeconfig, o.toContext)
	if err != nil {
		return err
	}
	// Helper pods walk the claims the restore wrote (no repository
	// password needed: they read the claims, not the snapshots).
	if h, err := helperpod.New(ctx, loc.SecretURL(), cluster, o.volumes.settings("", o.log)); err == nil {
		opts.PodVolumes = &restore.PodVolumeOptions{CheckClaims: h.CheckClaims}
		defer h.Run.Close(ctx)
	} else {
		o.log.Info("the restored claims' data is not checked", "reason", err)
	}
	v, paths, err := runVerify(ctx, o.globals, cluster, loc, opts, o.reportDir, restoreTiming...)
	if err != nil {
		return err
	}
	if err := o.print(v, paths); err != nil {
		return err
	}
	return verifyExit(v)
}

func (o *verifyOptions) print(v *report.Verification, paths reportPaths) error {
	if o.output != "table" {
		return printObject(o.stdout, o.output, v)
	}
	printVerification(o.globals, v, paths)
	return nil
}

// reportPaths are where a verification report was written.
type reportPaths struct {
	JSON string `json:"json"`
	HTML string `json:"html"`
}

// runVerify compares the backup with cluster and writes the report files
// into dir. extra timings (a migrate's backup and restore) go first.
func runVerify(ctx context.Context, g *globals, cluster *kube.Cluster, loc *store.Location, opts restore.Options, dir string, extra ...report.Timing) (*report.Verification, reportPaths, error) {
	pr := newProgress(g.stderr, "verify "+opts.Spec.BackupName)
	opts.OnProgress = pr.update
	v, err := restore.Verify(ctx, cluster, loc, opts)
	pr.stop()
	if err != nil {
		return nil, reportPaths{}, err
	}
	if opts.Name != "verify-"+opts.Spec.BackupName {
		v.Restore = opts.Name
	}
	v.Running = enginemigration.CheckRunning(ctx, cluster, loc, opts, v)
	if len(extra) > 0 {
		// The backup's own timing first (from its record), then extra
		// (a restore), then the verify phase.
		var t []report.Timing
		if len(v.Timings) > 1 && extra[0].Phase != "backup" {
			t = append(t, v.Timings[0])
		}
		v.Timings = append(append(t, extra...), v.Timings[len(v.Timings)-1])
	}
	var p reportPaths
	p.JSON, p.HTML, err = v.WriteFiles(dir)
	if err != nil {
		return nil, reportPaths{}, err
	}
	return v, p, nil
}

func printVerification(g *globals, v *report.Verification, p reportPaths) {
	jsonPath, htmlPath := p.JSON, p.HTML
	w := g.stdout
	s := v.Summary
	fmt.Fprintf(w, "Verification of backup %s against %s: %d objects: %d match (%d changed on purpose), %d differ, %d missing, %d not compared, %d skipped by the plan\n",
		v.Backup, v.TargetServer, s.Objects, s.Matched, s.Transformed, s.Differ, s.Missing, s.Failed, s.Skipped)
	if len(v.Differences) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RESOURCE\tNAMESPACE\tNAME\tOUTCOME\tWHERE")
		for _, d := range v.Differences {
			ns, name := d.Namespace, d.Name
			if d.TargetNamespace != "" {
				ns = d.TargetNamespace
			}
			if d.TargetName != "" {
				name = d.TargetName
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Resource, orDash(ns), name, d.Outcome, d.Message)
		}
		_ = tw.Flush()
	}
	printRunning(w, v.Running)
	for _, e := range v.Errors {
		fmt.Fprintf(w, "Error: %s\n", e)
	}
	fmt.Fprintf(w, "Report: %s, %s\n", htmlPath, jsonPath)
}

// verifyExit is nil when the target matches the backup, else exit code 2.
func verifyExit(v *report.Verification) error {
	switch {
	case v.Summary.Unexpected > 0:
		return &exitError{code: ExitPartiallyFailed, msg: fmt.Sprintf("verification of backup %s: %d unexpected difference(s)", v.Backup, v.Summary.Unexpected)}
	case v.Running != nil && v.Running.Counts.Failed > 0:
		return &exitError{code: ExitPartiallyFailed, msg: fmt.Sprintf("verification of backup %s: the objects match, but not everything runs: %s", v.Backup, v.Running.Headline())}
	case len(v.Errors) > 0:
		return &exitError{code: ExitPartiallyFailed, msg: fmt.Sprintf("verification of backup %s: %d error(s)", v.Backup, len(v.Errors))}
	}
	return nil
}

// printRunning prints the running section's headline and the checks
// that failed, with their reasons.
func printRunning(w io.Writer, r *report.Running) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "Running: %s\n", r.Headline())
	f := r.Failures()
	if len(f) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tOUTCOME\tREASON\tMESSAGE")
	for _, c := range f {
		kind := c.Resource
		if kind == "" {
			kind = c.Kind
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", kind, orDash(c.Namespace), c.Name, c.Outcome, c.Reason, c.Message)
	}
	_ = tw.Flush()
}

// defaultReportDir is where a verification's report of name goes without
// --report-dir: under ferry's state folder ($XDG_STATE_HOME/ferry, or
// ~/.local/state/ferry), not the current folder.
func defaultReportDir(name string) string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "ferry", "reports", name)
}

// checkReportDir makes dir and checks that a report can be written there,
// before any work that the report is for.
//
// The folders it made are removed by removeEmpty, which the caller defers:
// a run that failed before it wrote the report leaves no empty folder.
func checkReportDir(dir string) (removeEmpty func(), err error) {
	var made []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	removeEmpty = func() {
		for _, d := range made {
			if os.Remove(d) != nil { // not empty: the report is there
				return
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return func() {}, fmt.Errorf("--report-dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ".ferry-write-check-")
	if err != nil {
		removeEmpty()
		return func() {}, fmt.Errorf("--report-dir %s is not writable: %w", dir, err)
	}
	f.Close()
	return removeEmpty, os.Remove(f.Name())
}
