package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/modifiers"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/transform"
)

func newRestoreCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "restore", Short: "Create, list and describe restores"}
	cmd.AddCommand(newRestoreCreateCmd(g), newRestoreGetCmd(g), newRestoreDescribeCmd(g), newRestoreDeleteCmd(g))
	return cmd
}

// restoreFlags are the restore flags shared by restore create and migrate.
type restoreFlags struct {
	includeNamespaces, excludeNamespaces []string
	includeResources, excludeResources   []string
	namespaceMappings                    []string
	storageClassMappings                 []string
	existingPolicy                       string
	preserveNodePorts                    bool
	restoreStatus                        []string
	crdTimeout                           time.Duration
	dryRun                               bool
	fromCloud, toCloud                   string
	resourceModifiers                    string
}

// register adds the flags; prefix is "" for restore create and
// "restore-" for the filters of migrate, whose backup has its own.
func (f *restoreFlags) register(cmd *cobra.Command, withFilters bool) {
	fl := cmd.Flags()
	if withFilters {
		fl.StringSliceVar(&f.includeNamespaces, "include-namespaces", nil, "namespaces to restore, as globs (default all in the backup)")
		fl.StringSliceVar(&f.excludeNamespaces, "exclude-namespaces", nil, "namespaces to leave out, as globs")
		fl.StringSliceVar(&f.includeResources, "include-resources", nil, "resources to restore: name, name.group or kind (default all)")
		fl.StringSliceVar(&f.excludeResources, "exclude-resources", nil, "resources to leave out")
	}
	fl.StringSliceVar(&f.namespaceMappings, "namespace-mappings", nil, "restore namespaces under new names: src1:dst1,src2:dst2")
	fl.StringSliceVar(&f.storageClassMappings, "storage-class-mappings", nil, "map storage classes in PVCs, PVs, StatefulSet volumeClaimTemplates and ephemeral volumes: old1:new1,...")
	fl.StringVar(&f.existingPolicy, "existing-resource-policy", "none", "for objects already in the target: none (compare and report) or update")
	fl.BoolVar(&f.preserveNodePorts, "preserve-nodeports", false, "keep Services' nodePort and healthCheckNodePort (a port taken in the target gets a new one, with a warning)")
	fl.StringSliceVar(&f.restoreStatus, "restore-status", nil, "resources whose .status is restored too (default none)")
	fl.StringVar(&f.resourceModifiers, "resource-modifiers", "", "YAML file of resource-modifier rules (Velero's format: JSON, merge and strategic patches with conditions) applied to restored objects")
	fl.StringVar(&f.fromCloud, "from-cloud", "", "cloud profile of the source: "+strings.Join(transform.CloudNames(), ", ")+" (default generic)")
	fl.StringVar(&f.toCloud, "to-cloud", "", "cloud profile of the target, to translate load-balancer annotations, node labels, storage provisioners and the ingress class into")
	fl.BoolVar(&f.dryRun, "dry-run", false, "plan the restore and check every object with server-side dry-run requests; print what would be created, updated (with a diff), left unchanged or skipped; write nothing")
	fl.DurationVar(&f.crdTimeout, "crd-timeout", 60*time.Second, "how long to wait for each restored CRD to be Established before going on without it")
}

func (f *restoreFlags) spec(backupName string) (v1alpha1.RestoreSpec, error) {
	m, err := parseMappings("namespace-mappings", f.namespaceMappings)
	if err != nil {
		return v1alpha1.RestoreSpec{}, err
	}
	sc, err := parseMappings("storage-class-mappings", f.storageClassMappings)
	if err != nil {
		return v1alpha1.RestoreSpec{}, err
	}
	var rules string
	if f.resourceModifiers != "" {
		data, err := os.ReadFile(f.resourceModifiers)
		if err != nil {
			return v1alpha1.RestoreSpec{}, fmt.Errorf("--resource-modifiers: %w", err)
		}
		if _, err := modifiers.Load(f.resourceModifiers); err != nil {
			return v1alpha1.RestoreSpec{}, err // names the file, the rule and the field
		}
		rules = string(data)
	}
	return v1alpha1.RestoreSpec{
		BackupName:         backupName,
		IncludedNamespaces: f.includeNamespaces, ExcludedNamespaces: f.excludeNamespaces,
		IncludedResources: f.includeResources, ExcludedResources: f.excludeResources,
		NamespaceMapping:       m,
		StorageClassMapping:    sc,
		DryRun:                 f.dryRun,
		FromCloud:              f.fromCloud,
		ResourceModifiers:      rules,
		ToCloud:                f.toCloud,
		ExistingResourcePolicy: v1alpha1.ExistingResourcePolicy(f.existingPolicy),
		PreserveNodePorts:      f.preserveNodePorts,
		RestoreStatus:          f.restoreStatus,
	}, nil
}

func newRestoreCreateCmd(g *globals) *cobra.Command {
	var f restoreFlags
	var cf cryptFlags
	var imf imageModeFlags
	var from, fromVelero string
	var vf volumeFlags
	var sm serverMode
	cmd := &cobra.Command{
		Use:   "create [NAME] --from-backup BACKUP",
		Short: "Restore a backup into the cluster",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			switch {
			case from != "" && fromVelero != "":
				return fmt.Errorf("--from-backup and --from-velero-backup: give one")
			case fromVelero != "":
				from = fromVelero
			case from == "":
				return fmt.Errorf("--from-backup (or --from-velero-backup) is required")
			}
			name := defaultName(from)
			if len(args) == 1 {
				name = args[0]
			}
			spec, err := f.spec(from)
			if err != nil {
				return err
			}
			spec.FromVelero = fromVelero != ""
			imf.applyRestore(&spec)
			if err := imf.checkPlatforms(true); err != nil {
				return err
			}
			iopts, err := imf.options()
			if err != nil {
				return err
			}
			opts := restore.Options{Name: name, Spec: spec, Log: g.log, CRDTimeout: f.crdTimeout, Images: iopts}
			if err := opts.Validate(); err != nil {
				return err
			}
			if err := cf.validate(); err != nil {
				return err
			}
			if on, err := sm.enabled(g, cmd); err != nil {
				return err
			} else if on {
				return sm.createRestoreCR(ctx, g, name, spec, f.crdTimeout)
			}
			loc, err := g.openStore(ctx, &cf)
			if err != nil {
				return err
			}
			defer loc.Close()
			cluster, err := connect(ctx, g.kubeconfig, g.context)
			if err != nil {
				return err
			}
			pv, closeVolumes, err := vf.restoreOptions(ctx, loc, cluster, g.log)
			if err != nil {
				return err
			}
			defer closeVolumes()
			opts.PodVolumes = pv
			return runRestore(g, cluster, loc, opts, &vf)
		},
	}
	cmd.Flags().StringVar(&from, "from-backup", "", "name of the backup to restore (required)")
	cmd.Flags().StringVar(&fromVelero, "from-velero-backup", "", "name of a backup made by Velero in --storage (its backups/<name>/velero-backup.json and <name>.tar.gz) to restore instead")
	f.register(cmd, true)
	cf.registerIdentity(cmd)
	imf.registerMappings(cmd, true)
	imf.registerRestore(cmd, true)
	imf.register(cmd, "image-concurrency")
	// Refused on a restore (checkPlatforms): not offered in its help.
	_ = cmd.Flags().MarkHidden("platform")
	vf.registerRestore(cmd)
	sm.register(cmd, false)
	return cmd
}

func runRestore(g *globals, cluster *kube.Cluster, loc *store.Location, opts restore.Options, vf *volumeFlags) error {
	pr := newProgress(g.stderr, "restore "+opts.Name)
	opts.OnProgress = pr.update
	dp := &dataProgress{}
	if opts.PodVolumes != nil && !opts.PodVolumes.ByNodeAgent {
		dp = pr.dataBar("volume data")
		opts.PodVolumes.OnProgress = dp.update
		vf.showVolumes(dp)
	}
	r, res, err := restore.Run(contextOf(g), cluster, loc, opts)
	dp.stop()
	pr.stop()
	if err != nil {
		return err
	}
	if err := printRestore(g, r, res); err != nil {
		return err
	}
	return phaseExit(r.Status.Phase, "restore "+r.Name)
}

func printRestore(g *globals, r *v1alpha1.Restore, res *report.Results) error {
	if r.Spec.DryRun {
		return printDryRun(g, r, res)
	}
	if g.output != "table" {
		return printObject(g.stdout, g.output, r)
	}
	c := r.Status.Counts
	fmt.Fprintf(g.stdout, "Restore %s of backup %s: %s in %s\n", r.Name, r.Spec.BackupName, r.Status.Phase, duration(r.Status.StartTimestamp, r.Status.CompletionTimestamp))
	fmt.Fprintf(g.stdout, "  created %d, updated %d, unchanged %d, skipped %d, failed %d\n", c.Created, c.Updated, c.Unchanged, c.Skipped, c.Failed)
	if r.Spec.PushImages {
		fmt.Fprintf(g.stdout, "  images pushed %d, failed %d\n", r.Status.ImagesPushed, r.Status.ImagesFailed)
	}
	if r.Status.FailureReason != "" {
		fmt.Fprintf(g.stdout, "Failure: %s\n", r.Status.FailureReason)
	}
	printPodVolumes(g.stdout, r.Status.PodVolumes, "restored")
	if res != nil {
		printProblems(g, res)
	}
	return nil
}

func newRestoreGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get [NAME]",
		Short: "List restores recorded in the backup storage location",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			loc, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer loc.Close()
			var restores []*v1alpha1.Restore
			if len(args) == 1 {
				r, err := loc.GetRestore(ctx, args[0])
				if err != nil {
					return err
				}
				restores = append(restores, r)
			} else if restores, err = loc.ListRestores(ctx); err != nil {
				return err
			}
			if restores == nil {
				restores = []*v1alpha1.Restore{}
			}
			if g.output != "table" {
				if len(args) == 1 {
					return printObject(g.stdout, g.output, restores[0])
				}
				return printObject(g.stdout, g.output, list(restores))
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tBACKUP\tSTATUS\tCREATED\tUPDATED\tUNCHANGED\tSKIPPED\tFAILED\tSTARTED")
			for _, r := range restores {
				c := r.Status.Counts
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Name, r.Spec.BackupName, r.Status.Phase, c.Created, c.Updated, c.Unchanged, c.Skipped, c.Failed, tsString(r.Status.StartTimestamp))
			}
			return tw.Flush()
		},
	}
}

func newRestoreDescribeCmd(g *globals) *cobra.Command {
	var details bool
	var cf cryptFlags
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a restore's status, counts, skipped and failed items, warnings and errors",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			loc, err := g.openStore(ctx, &cf)
			if err != nil {
				return err
			}
			defer loc.Close()
			r, err := loc.GetRestore(ctx, args[0])
			if err != nil {
				return err
			}
			res := &report.Results{}
			if err := loc.GetJSON(ctx, store.RestoreResultsKey(r.Name), res); errors.Is(err, store.ErrEncrypted) {
				res.Warnf("the results are encrypted: pass --encryption-identity FILE to see them")
			} else if err != nil && !errors.Is(err, store.ErrNotFound) {
				res.Warnf("the results cannot be read: %v", err)
			}
			vols, err := restoreVolumeRecords(ctx, loc, r.Name)
			if err != nil {
				res.Warnf("the volume records cannot be read: %v", err)
			}
			if g.output != "table" {
				return printObject(g.stdout, g.output, map[string]any{"restore": r, "results": res, "volumes": vols})
			}
			w := g.stdout
			fmt.Fprintf(w, "Name:       %s\n", r.Name)
			fmt.Fprintf(w, "Backup:     %s\n", r.Spec.BackupName)
			fmt.Fprintf(w, "Phase:      %s\n", r.Status.Phase)
			if r.Status.FailureReason != "" {
				fmt.Fprintf(w, "Failure:    %s\n", r.Status.FailureReason)
			}
			if c := r.Status.TargetCluster; c != nil {
				fmt.Fprintf(w, "Target:     %s (%s)\n", c.Server, c.GitVersion)
			}
			fmt.Fprintf(w, "Policy:     %s\n", r.Spec.ExistingResourcePolicy)
			for src, dst := range r.Spec.NamespaceMapping {
				fmt.Fprintf(w, "Namespace mapping: %s -> %s\n", src, dst)
			}
			fmt.Fprintf(w, "Started:    %s\n", tsString(r.Status.StartTimestamp))
			fmt.Fprintf(w, "Completed:  %s\n", tsString(r.Status.CompletionTimestamp))
			c := r.Status.Counts
			fmt.Fprintf(w, "Items:      created %d, updated %d, unchanged %d, skipped %d, failed %d\n", c.Created, c.Updated, c.Unchanged, c.Skipped, c.Failed)
			printPodVolumes(w, r.Status.PodVolumes, "restored")
			if len(vols) > 0 {
				printRestoreVolumes(w, vols)
			}
			for _, x := range res.Warnings {
				fmt.Fprintf(w, "Warning: %s\n", x)
			}
			for _, x := range res.Errors {
				fmt.Fprintf(w, "Error: %s\n", x)
			}
			keep := func(x report.Result) bool { return x.Outcome == report.Failed || x.Outcome == report.Skipped }
			if details {
				keep = nil
			}
			fmt.Fprintln(w)
			return res.WriteTable(w, keep)
		},
	}
	cmd.Flags().BoolVar(&details, "details", false, "list every item, not only skipped and failed ones")
	cf.registerIdentity(cmd)
	return cmd
}

// dryRunVerbs names outcomes as what a dry run says would happen.
var dryRunVerbs = map[report.Outcome]string{
	report.Created: "would create", report.Updated: "would update", report.Unchanged: "unchanged",
	report.Skipped: "skipped", report.Failed: "would fail",
}

// printDryRun prints a dry run: per object what would happen, then the
// diffs of objects that exist and differ. -o json|yaml prints the same
// data as {restore, results}.
func printDryRun(g *globals, r *v1alpha1.Restore, res *report.Results) error {
	if g.output != "table" {
		return printObject(g.stdout, g.output, map[string]any{"restore": r, "results": res})
	}
	c := r.Status.Counts
	fmt.Fprintf(g.stdout, "Dry run of restoring backup %s into %s: nothing was written\n", r.Spec.BackupName, r.Status.TargetCluster.Server)
	fmt.Fprintf(g.stdout, "  would create %d, would update %d, unchanged %d, skipped %d, would fail %d\n\n", c.Created, c.Updated, c.Unchanged, c.Skipped, c.Failed)
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tNAMESPACE\tNAME\tPLAN\tDETAIL")
	items := res.Sorted()
	for _, it := range items {
		ns := it.Namespace
		if it.TargetNamespace != "" {
			ns = it.TargetNamespace
		}
		detail := it.Reason
		if it.Message != "" {
			if detail != "" {
				detail += ": "
			}
			detail += it.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", it.Resource, orDash(ns), it.Name, dryRunVerbs[it.Outcome], detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, it := range items {
		if it.Diff != "" {
			fmt.Fprintf(g.stdout, "\n# %s %s/%s (%s)\n%s", it.Resource, it.Namespace, it.Name, dryRunVerbs[it.Outcome], it.Diff)
		}
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(g.stdout, "Warning: %s\n", w)
	}
	for _, e := range res.Errors {
		fmt.Fprintf(g.stdout, "Error: %s\n", e)
	}
	return nil
}
