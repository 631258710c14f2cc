package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	enginemigration "github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/modifiers"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/restore"
	"github.com/kubeferry/ferry/pkg/running"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/transform"
	"github.com/kubeferry/ferry/pkg/volumes"
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
	existingPolicy, existingVolumeData   string
	preserveNodePorts                    bool
	restoreStatus                        []string
	crdTimeout                           time.Duration
	dryRun                               bool
	fromCloud, toCloud                   string
	resourceModifiers                    string
	// verifyRuntime and verifyRuntimeTimeout are spec.verifyRuntime.
	verifyRuntime        bool
	verifyRuntimeTimeout time.Duration
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
	fl.StringVar(&f.existingVolumeData, "existing-volume-data-policy", "write", "for a claim that is in the target, was not created by this restore, and does not hold this backup's data (no done-marker of its snapshot): write (the backup's data is written into it; entries of the same name are replaced) or keep (its data is kept, and the workloads that mount it are not created). Claims this restore created are always filled; a claim that holds the data already, or that a pod mounts, is never written")
	fl.BoolVar(&f.preserveNodePorts, "preserve-nodeports", false, "keep all of Services' node ports, also those the source allocated (by default only those a client set are kept; a port taken in the target gets a new one, with a warning)")
	fl.StringSliceVar(&f.restoreStatus, "restore-status", nil, "resources whose .status is restored too (default none)")
	fl.StringVar(&f.resourceModifiers, "resource-modifiers", "", "YAML file of resource-modifier rules (Velero's format: JSON, merge and strategic patches with conditions) applied to restored objects")
	fl.StringVar(&f.fromCloud, "from-cloud", "", "cloud profile of the source: "+strings.Join(transform.CloudNames(), ", ")+" (default generic)")
	fl.StringVar(&f.toCloud, "to-cloud", "", "cloud profile of the target, to translate load-balancer annotations, node labels, storage provisioners and the ingress class into")
	fl.BoolVar(&f.dryRun, "dry-run", false, "plan the restore and check every object with server-side dry-run requests; print what would be created, updated (with a diff), left unchanged or skipped; write nothing")
	fl.DurationVar(&f.crdTimeout, "crd-timeout", 60*time.Second, "how long to wait for each restored CRD to be Established before going on without it")
	fl.BoolVar(&f.verifyRuntime, "verify-runtime", true, "with a verification: also wait for the restored workloads to run, Services to have a ready endpoint and claims to be bound, walk each restored claim in a helper pod to compare it with what the restore wrote, and resolve every image they name; what does not is reported with the cluster's reason and makes the outcome PartiallyFailed (false: a move of resources only; the report says the check was skipped)")
	fl.DurationVar(&f.verifyRuntimeTimeout, "verify-runtime-timeout", running.DefaultTimeout, "how long the runtime checks wait for the restored workloads to run")
}

// runtimeVerification is spec.verifyRuntime of the flags: nil when they
// are the defaults.
func (f *restoreFlags) runtimeVerification() *v1alpha1.RuntimeVerification {
	if f.verifyRuntime && (f.verifyRuntimeTimeout == running.DefaultTimeout || f.verifyRuntimeTimeout == 0) {
		return nil
	}
	rt := &v1alpha1.RuntimeVerification{Skip: !f.verifyRuntime}
	if f.verifyRuntimeTimeout != running.DefaultTimeout {
		rt.Timeout = &metav1.Duration{Duration: f.verifyRuntimeTimeout}
	}
	return rt
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
			return v1alpha1.RestoreSpec{}, fmt.Errorf("--resource-modifiers: %w", err) // names the file, the rule and the field
		}
		rules = string(data)
	}
	return v1alpha1.RestoreSpec{
		BackupName:         backupName,
		IncludedNamespaces: f.includeNamespaces, ExcludedNamespaces: f.excludeNamespaces,
		IncludedResources: f.includeResources, ExcludedResources: f.excludeResources,
		NamespaceMapping:         m,
		StorageClassMapping:      sc,
		DryRun:                   f.dryRun,
		FromCloud:                f.fromCloud,
		ResourceModifiers:        rules,
		ToCloud:                  f.toCloud,
		ExistingResourcePolicy:   v1alpha1.ExistingResourcePolicy(f.existingPolicy),
		ExistingVolumeDataPolicy: v1alpha1.ExistingVolumeDataPolicy(f.existingVolumeData),
		PreserveNodePorts:        f.preserveNodePorts,
		RestoreStatus:            f.restoreStatus,
		VerifyRuntime:            f.runtimeVerification(),
	}, nil
}

// newRestoreSpec is the one place flags become a RestoreSpec (restore
// create, with or without --server, migrate and verify): the restore
// flags, which may read a resource-modifiers file, the image flags (nil
// where a command has none) and whether the backup is Velero's.
func newRestoreSpec(rf *restoreFlags, backupName string, imf *imageModeFlags, fromVelero bool) (v1alpha1.RestoreSpec, error) {
	spec, err := rf.spec(backupName)
	if err != nil {
		return v1alpha1.RestoreSpec{}, err
	}
	spec.FromVelero = fromVelero
	if imf != nil {
		imf.applyRestore(&spec)
	}
	return spec, nil
}

// restoreCreateOptions are restore create's.
type restoreCreateOptions struct {
	*globals
	restore                                   restoreFlags
	crypt                                     cryptFlags
	images                                    imageModeFlags
	volumes                                   volumeFlags
	server                                    serverMode
	from, fromVelero                          string
	verify, preflight, pullProbe, volumeProbe bool
	timeout                                   time.Duration
	verifyTimeout                             time.Duration

	name string
	spec v1alpha1.RestoreSpec
}

func newRestoreCreateCmd(g *globals) *cobra.Command {
	o := &restoreCreateOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "create [NAME] --from-backup BACKUP",
		Short: "Restore a backup into the cluster",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runE(o),
	}
	cmd.Flags().StringVar(&o.from, "from-backup", "", "name of the backup to restore (required)")
	cmd.Flags().StringVar(&o.fromVelero, "from-velero-backup", "", "name of a backup made by Velero in --storage (its backups/<name>/velero-backup.json and <name>.tar.gz) to restore instead")
	o.restore.register(cmd, true)
	o.crypt.registerIdentity(cmd)
	o.images.registerMappings(cmd, true)
	o.images.registerRestore(cmd, true)
	o.images.register(cmd, "image-concurrency")
	// Refused on a restore (checkPlatforms): not offered in its help.
	_ = cmd.Flags().MarkHidden("platform")
	o.volumes.registerRestore(cmd)
	cmd.Flags().DurationVar(&o.timeout, "timeout", deadline.DefaultRestore, "how long the restore (volume data included) may take before it fails; run again, it finishes what it left (0: no deadline)")
	cmd.Flags().DurationVar(&o.verifyTimeout, "verify-timeout", deadline.DefaultVerify, "with --verify: how long the verification may take before it fails (0: no deadline)")
	o.server.register(cmd, false)
	cmd.Flags().BoolVar(&o.preflight, "preflight", false, "check the restore without running it: read the backup and the cluster, write nothing to either or to the location but its probes (removed when it ends), and list the risks (blockers, warnings, notes), each with the objects, what will happen and the fix, with a time estimate; keeps preflight.json and preflight.html in $XDG_STATE_HOME/ferry/reports/NAME (or ~/.local/state/...); exit 2 when a risk is a blocker")
	cmd.Flags().BoolVar(&o.pullProbe, "preflight-pull-probe", false, "with --preflight: also have the target's nodes pull every image the workloads name, from a probe pod each in the target (told to run a path no image has, so no code of the image runs; removed when it ends), with the pods' pull Secrets (copies of the move's, removed too)")
	cmd.Flags().BoolVar(&o.volumeProbe, "preflight-volume-probe", true, "with --preflight, when helper pods move volume data: measure each volume's used bytes (the kubelet's statistics, else a sizing helper pod) and the data path (a probe pod in each cluster uploads and downloads 128 MiB through the location, under preflight-probes/, removed after) for the time estimate, and check the repository password; false leaves the volume data out of the estimate")
	cmd.Flags().BoolVar(&o.verify, "verify", false, "after the restore, compare every object of the backup with the cluster, as migrate does, and keep the report in the location (restores/NAME/report.json, .html); a difference makes the restore PartiallyFailed")
	return cmd
}

// Complete names the backup and the restore, and builds the spec (reading
// the resource-modifiers file) and checks the identity file.
func (o *restoreCreateOptions) Complete(cmd *cobra.Command, args []string) error {
	backupName := o.from
	switch {
	case cmd.Flags().Changed("verify-timeout") && !o.verify:
		return fmt.Errorf("--verify-timeout is for --verify")
	case o.from != "" && o.fromVelero != "":
		return fmt.Errorf("--from-backup and --from-velero-backup: give one")
	case o.fromVelero != "":
		backupName = o.fromVelero
	case o.from == "":
		return fmt.Errorf("--from-backup (or --from-velero-backup) is required")
	}
	o.name = defaultName(backupName)
	if len(args) == 1 {
		o.name = args[0]
	}
	var err error
	if o.spec, err = newRestoreSpec(&o.restore, backupName, &o.images, o.fromVelero != ""); err != nil {
		return err
	}
	o.spec.Verify = o.verify
	o.server.complete(cmd)
	return o.crypt.complete()
}

func (o *restoreCreateOptions) Validate() error {
	if o.pullProbe && !o.preflight {
		return fmt.Errorf("--preflight-pull-probe goes with --preflight")
	}
	if err := o.images.checkPlatforms(true); err != nil {
		return err
	}
	if err := o.images.validate(); err != nil {
		return err
	}
	opts := o.options(images.Options{})
	if err := opts.Validate(); err != nil {
		return err
	}
	if err := o.server.validate(); err != nil {
		return err
	}
	switch {
	case o.preflight && o.server.on:
		return fmt.Errorf("--preflight runs here, not in server mode: drop --server")
	case o.preflight && (o.spec.DryRun || o.verify):
		return fmt.Errorf("--preflight writes nothing and restores nothing: drop --dry-run and --verify")
	case o.server.on:
		return nil
	}
	return o.volumes.validate()
}

// options are the engine's options, but for the pod volumes.
func (o *restoreCreateOptions) options(iopts images.Options) restore.Options {
	return restore.Options{Name: o.name, Spec: o.spec, Log: o.log, CRDTimeout: o.restore.crdTimeout, Images: iopts,
		Deadline: deadline.Deadline{After: o.timeout, Field: "--timeout"}, VerifyDeadline: deadline.Deadline{After: o.verifyTimeout, Field: "--verify-timeout"}}
}

func (o *restoreCreateOptions) Run(ctx context.Context) error {
	if o.server.on {
		r, err := o.server.createRestore(ctx, o.globals, o.name, o.spec, o.restore.crdTimeout)
		if err != nil {
			return err
		}
		return o.server.printRestore(o.globals, r)
	}
	if o.preflight {
		return o.runPreflight(ctx)
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
	cluster, err := connect(ctx, o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	opts := o.options(iopts)
	pv, closeVolumes, err := o.volumes.restoreOptions(ctx, loc, cluster, o.log)
	if err != nil {
		return err
	}
	defer closeVolumes()
	opts.PodVolumes = pv
	r, res, err := runRestore(ctx, o.globals, cluster, loc, opts, &o.volumes)
	if err != nil {
		return err
	}
	if o.verify {
		pr := newProgress(o.stderr, "verify "+o.name)
		err := enginemigration.VerifyAndRecord(ctx, cluster, loc, opts, r, pr.update)
		pr.stop()
		if err != nil {
			fmt.Fprintf(o.stderr, "warning: %v\n", err)
		}
	}
	if err := printRestore(o.globals, r, res); err != nil {
		return err
	}
	return phaseExit(r.Status.Phase, "restore "+r.Name)
}

// runRestore restores into cluster from loc with progress bars on stderr,
// one for the items and, when this process moves pod volume data, one for
// the data (restore create and migrate).
func runRestore(ctx context.Context, g *globals, cluster *kube.Cluster, loc *store.Location, opts restore.Options, vf *volumeFlags) (*v1alpha1.Restore, *report.Results, error) {
	pr := newProgress(g.stderr, "restore "+opts.Name)
	opts.OnProgress = pr.update
	dp := &dataProgress{}
	if opts.PodVolumes != nil && !opts.PodVolumes.ByNodeAgent {
		dp = pr.dataBar("volume data")
		opts.PodVolumes.OnProgress = dp.update
		vf.showVolumes(dp)
	}
	r, res, err := restore.Run(ctx, cluster, loc, opts)
	dp.stop()
	pr.stop()
	return r, res, err
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
	if v := r.Status.Verification; v != nil {
		fmt.Fprintf(g.stdout, "  verified: %d of %d object(s) match the backup, %d differ, %d missing, %d could not be compared\n", v.Matched, v.Objects, v.Differ, v.Missing, v.Failed)
		if len(v.Report) > 0 {
			fmt.Fprintf(g.stdout, "  report kept in the location: %s\n", strings.Join(v.Report, ", "))
		}
		if v.Error != "" {
			fmt.Fprintf(g.stdout, "  verification error: %s\n", v.Error)
		}
	}
	if res != nil {
		printProblems(g, res)
	}
	return nil
}

// restoreGetOptions are restore get's.
type restoreGetOptions struct {
	*globals
	name string // empty: every restore
}

func newRestoreGetCmd(g *globals) *cobra.Command {
	o := &restoreGetOptions{globals: g}
	return &cobra.Command{
		Use:   "get [NAME]",
		Short: "List restores recorded in the backup storage location",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runE(o),
	}
}

func (o *restoreGetOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.name = args[0]
	}
	return nil
}

func (o *restoreGetOptions) Validate() error { return nil }

func (o *restoreGetOptions) Run(ctx context.Context) error {
	loc, err := o.openStore(ctx)
	if err != nil {
		return err
	}
	defer loc.Close()
	var restores []*v1alpha1.Restore
	if o.name != "" {
		r, err := loc.GetRestore(ctx, o.name)
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
	return o.print(restores)
}

func (o *restoreGetOptions) print(restores []*v1alpha1.Restore) error {
	if o.output != "table" {
		if o.name != "" {
			return printObject(o.stdout, o.output, restores[0])
		}
		return printObject(o.stdout, o.output, list(restores))
	}
	tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tBACKUP\tSTATUS\tCREATED\tUPDATED\tUNCHANGED\tSKIPPED\tFAILED\tSTARTED")
	for _, r := range restores {
		c := r.Status.Counts
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Name, r.Spec.BackupName, restorePhase(r), c.Created, c.Updated, c.Unchanged, c.Skipped, c.Failed, tsString(r.Status.StartTimestamp))
	}
	return tw.Flush()
}

// restorePhase is r's phase as get and describe show it: an InProgress
// record whose heartbeat stopped is Interrupted.
func restorePhase(r *v1alpha1.Restore) string {
	if restore.Interrupted(r, time.Now()) {
		return "Interrupted"
	}
	return string(r.Status.Phase)
}

// restoreDescribeOptions are restore describe's.
type restoreDescribeOptions struct {
	*globals
	crypt   cryptFlags
	details bool
	name    string
}

// restoreDescription is what restore describe prints.
type restoreDescription struct {
	restore *v1alpha1.Restore
	results *report.Results
	volumes []volumes.PodVolumeRestore
}

func newRestoreDescribeCmd(g *globals) *cobra.Command {
	o := &restoreDescribeOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a restore's status, counts, skipped and failed items, warnings and errors",
		Args:  cobra.ExactArgs(1),
		RunE:  runE(o),
	}
	cmd.Flags().BoolVar(&o.details, "details", false, "list every item, not only skipped and failed ones")
	o.crypt.registerIdentity(cmd)
	return cmd
}

func (o *restoreDescribeOptions) Complete(_ *cobra.Command, args []string) error {
	o.name = args[0]
	return nil
}

func (o *restoreDescribeOptions) Validate() error { return nil }

func (o *restoreDescribeOptions) Run(ctx context.Context) error {
	loc, err := o.openStore(ctx, &o.crypt)
	if err != nil {
		return err
	}
	defer loc.Close()
	r, err := loc.GetRestore(ctx, o.name)
	if err != nil {
		return err
	}
	d := &restoreDescription{restore: r, results: &report.Results{}}
	if err := loc.GetJSON(ctx, store.RestoreResultsKey(r.Name), d.results); errors.Is(err, store.ErrEncrypted) {
		d.results.Warnf("the results are encrypted: pass --encryption-identity FILE to see them")
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		d.results.Warnf("the results cannot be read: %v", err)
	}
	if d.volumes, err = restoreVolumeRecords(ctx, loc, r.Name); err != nil {
		d.results.Warnf("the volume records cannot be read: %v", err)
	}
	return o.print(d)
}

func (o *restoreDescribeOptions) print(d *restoreDescription) error {
	r, res := d.restore, d.results
	if o.output != "table" {
		return printObject(o.stdout, o.output, map[string]any{"restore": r, "results": res, "volumes": d.volumes})
	}
	w := o.stdout
	fmt.Fprintf(w, "Name:       %s\n", r.Name)
	fmt.Fprintf(w, "Backup:     %s\n", r.Spec.BackupName)
	fmt.Fprintf(w, "Phase:      %s\n", restorePhase(r))
	if restore.Interrupted(r, time.Now()) {
		fmt.Fprintf(w, "Failure:    interrupted: the run stopped without recording its outcome (its last heartbeat was at %s); run the same restore (or migrate) again to finish it\n", tsString(r.Status.HeartbeatTime))
	}
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
	// Errors and warnings first: the item table below can be long.
	for _, x := range res.Errors {
		fmt.Fprintf(w, "Error: %s\n", x)
	}
	for _, x := range res.Warnings {
		fmt.Fprintf(w, "Warning: %s\n", x)
	}
	printPodVolumes(w, r.Status.PodVolumes, "restored")
	if len(d.volumes) > 0 {
		printRestoreVolumes(w, d.volumes)
	}
	var keep func(report.Result) bool // --details: every item
	if !o.details {
		keep = summarizeSkips(w, res)
	}
	fmt.Fprintln(w)
	return res.WriteTable(w, keep)
}

// summarizeSkips prints, for the skip reasons shared by more than 3 items
// (events are history, left to controllers, ...), one line with the
// count, and returns the filter that lists the failed items and the other
// skipped ones: routine skips must not bury the rest (--details lists
// every item).
func summarizeSkips(w io.Writer, res *report.Results) func(report.Result) bool {
	byReason := map[string]int{}
	for _, x := range res.Items {
		if x.Outcome == report.Skipped {
			byReason[x.Reason]++
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(byReason)) {
		if n := byReason[reason]; n > 3 {
			fmt.Fprintf(w, "Skipped: %d items: %s (--details lists them)\n", n, reason)
		}
	}
	return func(x report.Result) bool {
		return x.Outcome == report.Failed || (x.Outcome == report.Skipped && byReason[x.Reason] <= 3)
	}
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
