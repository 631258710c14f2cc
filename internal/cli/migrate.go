package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
)

// contextOf returns the running command's context.
func contextOf(g *globals) context.Context {
	if g.ctx != nil {
		return g.ctx
	}
	return context.Background()
}

func newMigrateCmd(g *globals) *cobra.Command {
	var bf backupFlags
	var rf restoreFlags
	var cf cryptFlags
	var imf imageModeFlags
	var vf volumeFlags
	var fromKubeconfig, fromContext, toKubeconfig, toContext, name, reportDir string
	verify := true
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Back up the source cluster, restore into the target cluster, and summarize",
		Long: `migrate runs ferry backup create against the source cluster, then ferry restore
create against the target, through the backup storage location, and prints a summary.
The two clusters never talk to each other.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if name == "" {
				name = defaultName("migrate")
			}
			if err := backup.ValidateName(name); err != nil {
				return err
			}
			rspec, err := rf.spec(name)
			if err != nil {
				return err
			}
			imf.applyRestore(&rspec)
			if err := imf.checkPlatforms(false); err != nil {
				return err
			}
			iopts, err := imf.options()
			if err != nil {
				return err
			}
			ropts := restore.Options{Name: name, Spec: rspec, Log: g.log, CRDTimeout: rf.crdTimeout, Images: iopts}
			if err := ropts.Validate(); err != nil {
				return err
			}
			if fromKubeconfig == "" {
				fromKubeconfig = g.kubeconfig
			}
			if toKubeconfig == "" {
				toKubeconfig = g.kubeconfig
			}
			if fromContext == "" && toContext == "" && fromKubeconfig == toKubeconfig {
				return fmt.Errorf("migrate needs two clusters: set --from-context and --to-context (or --from-kubeconfig and --to-kubeconfig)")
			}
			if err := cf.validate(); err != nil {
				return err
			}
			if err := vf.validate(); err != nil {
				return err
			}
			if verify && !rspec.DryRun {
				if reportDir == "" {
					reportDir = "ferry-report-" + name
				}
				if err := checkReportDir(reportDir); err != nil {
					return err
				}
			}
			if len(cf.recipients) > 0 && cf.identity == "" {
				return fmt.Errorf("migrate with --encryption-recipient needs --encryption-identity too, to read the backup back for the restore")
			}
			loc, err := g.openStore(ctx, &cf)
			if err != nil {
				return err
			}
			defer loc.Close()
			if fromKubeconfig == toKubeconfig && fromContext == toContext {
				return fmt.Errorf("--from-context and --to-context name the same cluster (%q); migrate moves between two clusters", fromContext)
			}
			if _, err := loc.GetBackup(ctx, name); err == nil || !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("backup %q already exists in %s: choose another --name", name, loc.URL())
			}
			if _, err := loc.GetRestore(ctx, name); err == nil || !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("restore %q already exists in %s: choose another --name", name, loc.URL())
			}
			src, err := connect(ctx, fromKubeconfig, fromContext)
			if err != nil {
				return fmt.Errorf("source: %w", err)
			}
			dst, err := connect(ctx, toKubeconfig, toContext)
			if err != nil {
				return fmt.Errorf("target: %w", err)
			}
			srcID, err1 := src.ID(ctx)
			dstID, err2 := dst.ID(ctx)
			if src.Config.Host == dst.Config.Host || (err1 == nil && err2 == nil && srcID == dstID) {
				return fmt.Errorf("source %s (%s) and target %s (%s) are the same cluster; migrate moves between two clusters", src.Name, src.Config.Host, dst.Name, dst.Config.Host)
			}
			bpv, closeSrc, err := vf.backupOptions(ctx, loc, src, g.log)
			if err != nil {
				return fmt.Errorf("source: %w", err)
			}
			pr := newProgress(g.stderr, "backup "+name)
			dp := &dataProgress{}
			if bpv.Repository != nil {
				dp = pr.dataBar("volume data")
				bpv.OnProgress = dp.update
				vf.showVolumes(dp)
			}
			bspec := bf.spec()
			bspec.EncryptionRecipients = cf.recipients
			bspec.DefaultVolumesToFsBackup = vf.defaultToFS
			imf.applyBackup(&bspec)
			b, bres, err := backup.Run(ctx, src, loc, backup.Options{Name: name, Spec: bspec, Log: g.log, OnProgress: pr.update, Images: iopts, PodVolumes: bpv})
			dp.stop()
			pr.stop()
			closeSrc()
			if err != nil {
				return err
			}
			if g.output == "table" {
				if err := printBackup(g, b, bres); err != nil {
					return err
				}
			}
			if err := phaseExit(b.Status.Phase, "backup "+name); err != nil && b.Status.Phase != "PartiallyFailed" {
				return err
			}
			if vf.toNodePodsDir != "" {
				vf.nodePodsDir = vf.toNodePodsDir
			}
			rpv, closeDst, err := vf.restoreOptions(ctx, loc, dst, g.log)
			if err != nil {
				return fmt.Errorf("target: %w", err)
			}
			defer closeDst()
			ropts.PodVolumes = rpv
			pr = newProgress(g.stderr, "restore "+name)
			ropts.OnProgress = pr.update
			dp = &dataProgress{}
			if rpv != nil {
				dp = pr.dataBar("volume data")
				rpv.OnProgress = dp.update
				vf.showVolumes(dp)
			}
			r, rres, err := restore.Run(ctx, dst, loc, ropts)
			dp.stop()
			pr.stop()
			if err != nil {
				return err
			}
			// The restore is checked against the backup, after its own
			// expected changes, unless it is a dry run or did not run.
			if g.output == "table" {
				// The restore's summary shows whatever the verification does.
				if err := printRestore(g, r, rres); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "Migrated %s -> %s through %s: %d items backed up; %d created, %d unchanged, %d skipped, %d failed\n",
					src.Name, dst.Name, loc.URL(), b.Status.Progress.ItemsBackedUp, r.Status.Counts.Created, r.Status.Counts.Unchanged, r.Status.Counts.Skipped, r.Status.Counts.Failed)
				printMigratedVolumes(ctx, g.stdout, loc, name)
			}
			var v *report.Verification
			var paths reportPaths
			var verr error
			if verify && !r.Spec.DryRun && r.Status.Phase != "Failed" {
				var timings []report.Timing
				if s, e := b.Status.StartTimestamp, b.Status.CompletionTimestamp; s != nil && e != nil {
					timings = append(timings, report.NewTiming("backup", s.Time, e.Time))
				}
				if s, e := r.Status.StartTimestamp, r.Status.CompletionTimestamp; s != nil && e != nil {
					timings = append(timings, report.NewTiming("restore", s.Time, e.Time))
				}
				vopts := ropts
				vopts.OnProgress = nil
				v, paths, verr = runVerify(ctx, g, dst, loc, vopts, reportDir, timings...)
				if verr != nil {
					verr = fmt.Errorf("verification after the restore: %w", verr)
				}
			}
			if g.output != "table" {
				out := map[string]any{"backup": b, "restore": r}
				if r.Spec.DryRun {
					out["results"] = rres
				}
				if v != nil {
					out["verification"] = map[string]any{"summary": v.Summary, "differences": v.Differences, "timings": v.Timings, "report": paths}
				}
				if verr != nil {
					out["verificationError"] = verr.Error()
				}
				if err := printObject(g.stdout, g.output, out); err != nil {
					return err
				}
			} else if v != nil {
				printVerification(g, v, paths)
			}
			if verr != nil {
				return verr
			}
			// The worse of the two phases decides the exit code; then the
			// verification's differences.
			if r.Status.Phase == "Failed" || b.Status.Phase == "Completed" {
				if err := phaseExit(r.Status.Phase, "restore "+name); err != nil {
					return err
				}
			} else {
				return phaseExit(b.Status.Phase, "backup "+name)
			}
			if v != nil {
				return verifyExit(v)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "name of the backup and the restore (default migrate-<timestamp>)")
	fl.StringVar(&fromKubeconfig, "from-kubeconfig", "", "kubeconfig of the source cluster (default --kubeconfig)")
	fl.StringVar(&fromContext, "from-context", "", "context of the source cluster")
	fl.StringVar(&toKubeconfig, "to-kubeconfig", "", "kubeconfig of the target cluster (default --kubeconfig)")
	fl.StringVar(&toContext, "to-context", "", "context of the target cluster")
	fl.BoolVar(&verify, "verify", true, "after the restore, compare every backed-up object with the target and write a verification report (see ferry verify)")
	fl.StringVar(&reportDir, "report-dir", "", "directory for the verification's report.json and report.html (default ferry-report-<name>)")
	bf.register(cmd)
	rf.register(cmd, false)
	cf.registerRecipients(cmd)
	cf.registerIdentity(cmd)
	imf.registerBackup(cmd)
	imf.registerMappings(cmd, true)
	imf.registerRestore(cmd, false)
	imf.register(cmd, "image-concurrency")
	vf.registerMigrate(cmd)
	return cmd
}
