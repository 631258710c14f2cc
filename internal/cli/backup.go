package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/deadline"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/retention"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

func newBackupCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "backup", Short: "Create, list, describe and delete backups"}
	cmd.AddCommand(newBackupCreateCmd(g), newBackupGetCmd(g), newBackupDescribeCmd(g), newBackupDeleteCmd(g), newBackupVerifyCmd(g))
	return cmd
}

// backupFlags are the selection flags shared by backup create and migrate.
type backupFlags struct {
	includeNamespaces, excludeNamespaces []string
	includeResources, excludeResources   []string
	selector                             string
	includeCluster                       string
	preferredOnly                        bool
}

func (f *backupFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.includeNamespaces, "include-namespaces", nil, "namespaces to back up, as globs (default all)")
	fl.StringSliceVar(&f.excludeNamespaces, "exclude-namespaces", nil, "namespaces to leave out, as globs")
	fl.StringSliceVar(&f.includeResources, "include-resources", nil, "resources to back up: name, name.group or kind (default all)")
	fl.StringSliceVar(&f.excludeResources, "exclude-resources", nil, "resources to leave out")
	fl.StringVarP(&f.selector, "selector", "l", "", "label selector for the objects to back up")
	fl.StringVar(&f.includeCluster, "include-cluster-resources", "auto", "cluster-scoped resources: auto (all for a whole-cluster backup, only related ones for a namespace-filtered one), true or false")
	fl.BoolVar(&f.preferredOnly, "preferred-version-only", false, "store each resource at its preferred API version only (default: every served version, so a target that no longer serves the preferred one can still take it)")
}

func (f *backupFlags) spec() v1alpha1.BackupSpec {
	return v1alpha1.BackupSpec{
		IncludedNamespaces: f.includeNamespaces, ExcludedNamespaces: f.excludeNamespaces,
		IncludedResources: f.includeResources, ExcludedResources: f.excludeResources,
		LabelSelector: f.selector, IncludeClusterResources: f.includeCluster,
		PreferredVersionOnly: f.preferredOnly,
	}
}

// newBackupSpec is the one place flags become a BackupSpec (backup create,
// with or without --server, migrate, and schedule create's template): the
// selection, the encryption recipients, the image flags (nil where a
// command has none) and whether every pod volume's data is backed up.
func newBackupSpec(sel *backupFlags, cf *cryptFlags, imf *imageModeFlags, defaultToFS bool) v1alpha1.BackupSpec {
	spec := sel.spec()
	spec.EncryptionRecipients = cf.recipients
	if imf != nil {
		imf.applyBackup(&spec)
	}
	spec.DefaultVolumesToFsBackup = defaultToFS
	return spec
}

// deadline is --timeout.
func (o *backupCreateOptions) deadline() deadline.Deadline {
	return deadline.Deadline{After: o.timeout, Field: "--timeout"}
}

// backupCreateOptions are backup create's.
type backupCreateOptions struct {
	*globals
	selection backupFlags
	crypt     cryptFlags
	images    imageModeFlags
	volumes   volumeFlags
	server    serverMode
	timeout   time.Duration

	name      string
	spec      v1alpha1.BackupSpec
	imageOpts images.Options
}

func newBackupCreateCmd(g *globals) *cobra.Command {
	o := &backupCreateOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Back up the cluster's API objects into the backup storage location",
		Args:  cobra.ExactArgs(1),
		RunE:  runE(o),
	}
	o.selection.register(cmd)
	o.crypt.registerRecipients(cmd)
	o.images.registerBackup(cmd)
	o.images.registerMappings(cmd, false)
	o.images.register(cmd, "image-concurrency")
	o.volumes.registerBackup(cmd)
	cmd.Flags().DurationVar(&o.timeout, "timeout", deadline.DefaultBackup, "how long the backup (items, images, volume data) may take before it fails and is left Incomplete (0: no deadline)")
	o.server.register(cmd, true)
	return cmd
}

func (o *backupCreateOptions) Complete(cmd *cobra.Command, args []string) error {
	o.name = args[0]
	o.spec = newBackupSpec(&o.selection, &o.crypt, &o.images, o.volumes.defaultToFS)
	var err error
	if o.imageOpts, err = o.images.options(); err != nil {
		return err
	}
	o.server.complete(cmd)
	if o.server.on {
		return nil
	}
	return o.volumes.complete()
}

func (o *backupCreateOptions) Validate() error {
	if err := backup.ValidateName(o.name); err != nil {
		return err
	}
	if err := o.crypt.validate(); err != nil {
		return err
	}
	if err := (backup.Options{Name: o.name, Spec: o.spec, Deadline: o.deadline()}).Validate(); err != nil {
		return err
	}
	if err := o.server.validate(); err != nil || o.server.on {
		return err
	}
	return o.images.checkPlatforms(false)
}

func (o *backupCreateOptions) Run(ctx context.Context) error {
	if o.server.on {
		b, err := o.server.createBackup(ctx, o.globals, o.name, o.spec)
		if err != nil {
			return err
		}
		return o.server.printBackup(o.globals, b)
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
	pv, closeVolumes, err := o.volumes.backupOptions(ctx, loc, cluster, o.log)
	if err != nil {
		return err
	}
	b, res, err := runBackup(ctx, o.globals, cluster, loc, backup.Options{Name: o.name, Spec: o.spec, Log: o.log, Images: o.imageOpts, PodVolumes: pv, Deadline: o.deadline()}, &o.volumes)
	closeVolumes()
	if err != nil {
		return err
	}
	if err := printBackup(o.globals, b, res); err != nil {
		return err
	}
	return phaseExit(b.Status.Phase, "backup "+b.Name)
}

// runBackup backs up cluster into loc with progress bars on stderr, one
// for the items and, when this process moves pod volume data, one for
// the data (backup create and migrate).
func runBackup(ctx context.Context, g *globals, cluster *kube.Cluster, loc *store.Location, opts backup.Options, vf *volumeFlags) (*v1alpha1.Backup, *report.Results, error) {
	pr := newProgress(g.stderr, "backup "+opts.Name)
	dp := &dataProgress{}
	if pv := opts.PodVolumes; pv != nil && pv.Repository != nil {
		dp = pr.dataBar("volume data")
		pv.OnProgress = dp.update
		vf.showVolumes(dp)
	}
	opts.OnProgress = pr.update
	b, res, err := backup.Run(ctx, cluster, loc, opts)
	dp.stop()
	pr.stop()
	return b, res, err
}

func printBackup(g *globals, b *v1alpha1.Backup, res *report.Results) error {
	if g.output != "table" {
		return printObject(g.stdout, g.output, b)
	}
	fmt.Fprintf(g.stdout, "Backup %s: %s (%d of %d items) in %s\n", b.Name, b.Status.Phase, b.Status.Progress.ItemsBackedUp, b.Status.Progress.TotalItems, duration(b.Status.StartTimestamp, b.Status.CompletionTimestamp))
	if im := b.Status.Images; im != nil {
		fmt.Fprintf(g.stdout, "Images (%s): %d, %d failed\n", im.Mode, im.Images, im.Failed)
	}
	if b.Status.FailureReason != "" {
		fmt.Fprintf(g.stdout, "Failure: %s\n", b.Status.FailureReason)
	}
	printPodVolumes(g.stdout, b.Status.PodVolumes, "backed up")
	printHooks(g.stdout, b.Status.HookStatus)
	if res != nil {
		printProblems(g, res)
	}
	return nil
}

// printHooks says how many backup hooks ran and failed, if any ran.
func printHooks(w io.Writer, h *v1alpha1.HookStatus) {
	if h != nil {
		fmt.Fprintf(w, "Hooks: %d ran, %d failed\n", h.HooksAttempted, h.HooksFailed)
	}
}

func printProblems(g *globals, res *report.Results) {
	for _, n := range res.Notes {
		fmt.Fprintf(g.stdout, "Note: %s\n", n)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(g.stdout, "Warning: %s\n", w)
	}
	for _, e := range res.Errors {
		fmt.Fprintf(g.stdout, "Error: %s\n", e)
	}
	if res.Count(report.Failed) > 0 {
		_ = res.WriteTable(g.stdout, func(r report.Result) bool { return r.Outcome == report.Failed })
	}
}

// backupGetOptions are backup get's.
type backupGetOptions struct {
	*globals
	name string // empty: every backup
}

func newBackupGetCmd(g *globals) *cobra.Command {
	o := &backupGetOptions{globals: g}
	return &cobra.Command{
		Use:   "get [NAME]",
		Short: "List backups in the backup storage location, complete or not",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runE(o),
	}
}

func (o *backupGetOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.name = args[0]
	}
	return nil
}

func (o *backupGetOptions) Validate() error { return nil }

func (o *backupGetOptions) Run(ctx context.Context) error {
	loc, err := o.openStore(ctx)
	if err != nil {
		return err
	}
	defer loc.Close()
	backups := []*v1alpha1.Backup{}
	if o.name != "" {
		b, err := loc.GetBackup(ctx, o.name)
		if err != nil && !errors.Is(err, store.ErrIncomplete) {
			return err
		}
		backups = append(backups, b)
	} else {
		entries, err := loc.ListBackups(ctx)
		if err != nil {
			return err
		}
		for _, e := range entries {
			backups = append(backups, e.Backup)
		}
	}
	return o.print(backups)
}

func (o *backupGetOptions) print(backups []*v1alpha1.Backup) error {
	if o.output != "table" {
		if o.name != "" {
			return printObject(o.stdout, o.output, backups[0])
		}
		return printObject(o.stdout, o.output, list(backups))
	}
	tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tITEMS\tERRORS\tWARNINGS\tCREATED\tSIZE")
	for _, b := range backups {
		size := "-"
		if b.Status.Archive != nil {
			size = humanBytes(b.Status.Archive.Size)
		}
		created := "-"
		if !b.CreationTimestamp.IsZero() {
			created = b.CreationTimestamp.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", b.Name, b.Status.Phase, b.Status.Progress.ItemsBackedUp, b.Status.Errors, b.Status.Warnings, created, size)
	}
	return tw.Flush()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// loadBackup reads backup name and its archive, verified, keeping the
// entries and none of the items' bytes (backup.Verify): the one call of
// the engine's loader in the CLI.
func loadBackup(ctx context.Context, loc *store.Location, name string) (*archive.Archive, *v1alpha1.Backup, error) {
	return backup.Verify(ctx, loc, name)
}

// backupDescribeOptions are backup describe's.
type backupDescribeOptions struct {
	*globals
	crypt   cryptFlags
	details bool
	name    string
}

// backupDescription is what backup describe prints.
type backupDescription struct {
	backup  *v1alpha1.Backup
	results *report.Results
	volumes *volumes.BackupRecord // table output only
	// items are the archive's, read and verified (--details); itemsErr
	// is why they could not be.
	items    []archive.Item
	itemsErr error
}

func newBackupDescribeCmd(g *globals) *cobra.Command {
	o := &backupDescribeOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a backup's spec, status, resource counts, warnings and errors",
		Args:  cobra.ExactArgs(1),
		RunE:  runE(o),
	}
	cmd.Flags().BoolVar(&o.details, "details", false, "list every item of the archive (reads and verifies it)")
	o.crypt.registerIdentity(cmd)
	return cmd
}

func (o *backupDescribeOptions) Complete(_ *cobra.Command, args []string) error {
	o.name = args[0]
	return nil
}

func (o *backupDescribeOptions) Validate() error { return nil }

func (o *backupDescribeOptions) Run(ctx context.Context) error {
	loc, err := o.openStore(ctx, &o.crypt)
	if err != nil {
		return err
	}
	defer loc.Close()
	b, err := loc.GetBackup(ctx, o.name)
	if err != nil && !errors.Is(err, store.ErrIncomplete) {
		return err
	}
	d := &backupDescription{backup: b, results: &report.Results{}}
	if err := loc.GetJSON(ctx, store.BackupResultsKey(b.Name), d.results); errors.Is(err, store.ErrEncrypted) {
		d.results.Warnf("the results are encrypted: pass --encryption-identity FILE to see them")
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		d.results.Warnf("the results cannot be read: %v", err)
	}
	if o.output == "table" && b.Status.PodVolumes != nil {
		if d.volumes, err = volumes.LoadBackupRecord(ctx, loc, b.Name); err != nil {
			d.results.Warnf("the pod volume records cannot be read: %v", err)
		}
	}
	if o.details {
		var a *archive.Archive
		if a, _, d.itemsErr = loadBackup(ctx, loc, b.Name); d.itemsErr == nil {
			d.items = a.Items
		}
	}
	return o.print(d)
}

func (o *backupDescribeOptions) print(d *backupDescription) error {
	b := d.backup
	if o.output != "table" {
		out := map[string]any{"backup": b, "results": d.results}
		if o.details {
			// The archive's entries, read and verified (paths included).
			if d.itemsErr != nil {
				return d.itemsErr
			}
			entries := make([]archive.Entry, len(d.items))
			for i, it := range d.items {
				entries[i] = it.Entry
			}
			out["entries"] = entries
		}
		return printObject(o.stdout, o.output, out)
	}
	w := o.stdout
	fmt.Fprintf(w, "Name:         %s\n", b.Name)
	fmt.Fprintf(w, "Phase:        %s\n", b.Status.Phase)
	if b.Status.FailureReason != "" {
		fmt.Fprintf(w, "Failure:      %s\n", b.Status.FailureReason)
	}
	fmt.Fprintf(w, "Location:     %s\n", b.Spec.StorageLocation)
	if c := b.Status.SourceCluster; c != nil {
		fmt.Fprintf(w, "Source:       %s (%s)\n", c.Server, c.GitVersion)
	}
	fmt.Fprintf(w, "Namespaces:   included %s, excluded %s\n", orAll(b.Spec.IncludedNamespaces), orNone(b.Spec.ExcludedNamespaces))
	fmt.Fprintf(w, "Resources:    included %s, excluded %s\n", orAll(b.Spec.IncludedResources), orNone(b.Spec.ExcludedResources))
	fmt.Fprintf(w, "Selector:     %s\n", orDash(b.Spec.LabelSelector))
	fmt.Fprintf(w, "Cluster-scoped resources: %s\n", orDash(b.Spec.IncludeClusterResources))
	fmt.Fprintf(w, "Started:      %s\n", tsString(b.Status.StartTimestamp))
	fmt.Fprintf(w, "Completed:    %s\n", tsString(b.Status.CompletionTimestamp))
	fmt.Fprintf(w, "Items:        %d of %d backed up\n", b.Status.Progress.ItemsBackedUp, b.Status.Progress.TotalItems)
	printArchiveAndImages(w, b)
	printPodVolumes(w, b.Status.PodVolumes, "backed up")
	printHooks(w, b.Status.HookStatus)
	if d.volumes != nil {
		printVolumeRecord(w, d.volumes)
	}
	printResourceCounts(w, b.Status.ResourceCounts)
	printRelated(w, d.results)
	printProblems(o.globals, d.results)
	if !o.details {
		return nil
	}
	// The item list is the archive's manifest, read and verified.
	if d.itemsErr != nil {
		return d.itemsErr
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nRESOURCE\tVERSION\tNAMESPACE\tNAME\tSIZE")
	for _, it := range d.items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", it.GroupResource(), it.Version, orDash(it.Namespace), it.Name, it.Size)
	}
	return tw.Flush()
}

// printArchiveAndImages prints where a backup's archive and images are.
func printArchiveAndImages(w io.Writer, b *v1alpha1.Backup) {
	if a := b.Status.Archive; a != nil {
		fmt.Fprintf(w, "Archive:      %s, %s, sha256:%s\n", a.Key, humanBytes(a.Size), a.SHA256)
	}
	if im := b.Status.Images; im != nil {
		fmt.Fprintf(w, "Images:       %s: %d images, %d failed; %s, sha256:%s\n", im.Mode, im.Images, im.Failed, im.Key, im.SHA256)
		if im.IndexKey != "" {
			fmt.Fprintf(w, "Image bundle: %s; %d blobs written (%s), %d already in the store\n", im.IndexKey, im.BlobsWritten, humanBytes(im.BytesWritten), im.BlobsReused)
		}
	}
}

// printRelated lists the cluster-scoped objects a namespace-filtered
// backup brought as related, each with why (docs/design.md#related-objects).
func printRelated(w io.Writer, res *report.Results) {
	var related []report.Result
	for _, it := range res.Sorted() {
		if it.Outcome == report.BackedUp && it.Reason == backup.RelatedReason {
			related = append(related, it)
		}
	}
	if len(related) == 0 {
		return
	}
	fmt.Fprintln(w, "Related cluster-scoped objects:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  RESOURCE\tNAME\tWHY")
	for _, it := range related {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", it.Resource, it.Name, it.Message)
	}
	_ = tw.Flush()
}

// printResourceCounts prints a backup's items per resource, sorted.
func printResourceCounts(w io.Writer, counts map[string]int) {
	if len(counts) == 0 {
		return
	}
	fmt.Fprintln(w, "Resource counts:")
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-50s %d\n", k, counts[k])
	}
}

// backupDeleteOptions are backup delete's.
type backupDeleteOptions struct {
	*globals
	volumes volumeFlags
	name    string
}

func newBackupDeleteCmd(g *globals) *cobra.Command {
	o := &backupDeleteOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a backup (complete or interrupted) from the backup storage location, with its volume snapshots",
		Args:  cobra.ExactArgs(1),
		RunE:  runE(o),
	}
	o.volumes.registerPassword(cmd)
	return cmd
}

func (o *backupDeleteOptions) Complete(_ *cobra.Command, args []string) error {
	o.name = args[0]
	return nil
}

func (o *backupDeleteOptions) Validate() error { return nil }

func (o *backupDeleteOptions) Run(ctx context.Context) error {
	loc, err := o.openStore(ctx)
	if err != nil {
		return err
	}
	defer loc.Close()
	res, err := o.volumes.deleteBackup(ctx, loc, o.name)
	if err != nil {
		return err
	}
	o.print(loc.URL(), res)
	return nil
}

func (o *backupDeleteOptions) print(url string, res *retention.Result) {
	if res.Folder == retention.FolderGone {
		fmt.Fprintf(o.stdout, "Backup %s was not in %s (deleted by hand?): the %d volume snapshots left of it deleted\n", o.name, url, res.Snapshots)
		return
	}
	fmt.Fprintf(o.stdout, "Backup %s deleted from %s\n", o.name, url)
	if res.Snapshots > 0 {
		fmt.Fprintf(o.stdout, "  with %d volume snapshots\n", res.Snapshots)
	}
}

func orAll(s []string) string {
	if len(s) == 0 {
		return "*"
	}
	return strings.Join(s, ",")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "<none>"
	}
	return strings.Join(s, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// backupVerifyOptions are backup verify's.
type backupVerifyOptions struct {
	*globals
	crypt   cryptFlags
	volumes volumeFlags
	name    string
}

// backupVerification is what backup verify found.
type backupVerification struct {
	backup  *v1alpha1.Backup
	items   int
	images  map[string]any // nil for a backup without images
	volumes []volumeVerify
	damage  *volumes.Damage // of the volume repository's indexes
	bad     int             // volume data errors
}

func newBackupVerifyCmd(g *globals) *cobra.Command {
	o := &backupVerifyOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "verify NAME",
		Short: "Check a backup's archive, images file and image bundle against its manifest, commit marker and digests, without restoring it",
		Args:  cobra.ExactArgs(1),
		RunE:  runE(o),
	}
	o.crypt.registerIdentity(cmd)
	o.volumes.registerPassword(cmd)
	return cmd
}

func (o *backupVerifyOptions) Complete(_ *cobra.Command, args []string) error {
	o.name = args[0]
	return nil
}

func (o *backupVerifyOptions) Validate() error { return nil }

func (o *backupVerifyOptions) Run(ctx context.Context) error {
	loc, err := o.openStore(ctx, &o.crypt)
	if err != nil {
		return err
	}
	defer loc.Close()
	a, b, err := loadBackup(ctx, loc, o.name)
	if err != nil {
		return err
	}
	v := &backupVerification{backup: b, items: len(a.Items)}
	// The images file, and every blob of a bundle.
	if b.Status.Images != nil {
		rec, err := images.LoadRecord(ctx, loc, b)
		if err != nil {
			return err
		}
		blobs, size, err := images.NewBundle(loc).Verify(ctx, rec)
		if err != nil {
			return fmt.Errorf("backup %s: image bundle: %w", b.Name, err)
		}
		v.images = map[string]any{"key": b.Status.Images.Key, "images": len(rec.Images), "bundleBlobs": blobs, "bundleBytes": size}
	}
	if v.volumes, v.damage, err = o.volumes.verifyVolumes(ctx, loc, b.Name); err != nil {
		return err
	}
	for _, vol := range v.volumes {
		v.bad += len(vol.Errors)
	}
	if err := o.print(v); err != nil {
		return err
	}
	if v.bad > 0 {
		return &exitError{code: ExitFailed, msg: fmt.Sprintf("backup %s: %d volume data errors", b.Name, v.bad)}
	}
	return nil
}

func (o *backupVerifyOptions) print(v *backupVerification) error {
	b := v.backup
	if o.output != "table" {
		return printObject(o.stdout, o.output, map[string]any{"backup": b.Name, "verified": v.bad == 0, "items": v.items, "archive": b.Status.Archive, "images": v.images, "volumes": v.volumes, "volumeRepositoryDamage": v.damage})
	}
	state := "verified"
	if v.bad > 0 {
		state = "damaged volume data"
	}
	fmt.Fprintf(o.stdout, "Backup %s %s: %d items, archive %s (%s, sha256:%s) matches its manifest and commit\n",
		b.Name, state, v.items, b.Status.Archive.Key, humanBytes(b.Status.Archive.Size), b.Status.Archive.SHA256)
	if imgs := v.images; imgs != nil {
		fmt.Fprintf(o.stdout, "Images file %s matches its commit: %d images; %d bundled blobs (%s) match their digests\n", imgs["key"], imgs["images"], imgs["bundleBlobs"], humanBytes(imgs["bundleBytes"].(int64)))
	}
	printDamage(o.stdout, v.damage)
	for _, vol := range v.volumes {
		state := "verified"
		if len(vol.Errors) > 0 {
			state = fmt.Sprintf("DAMAGED (%d errors)", len(vol.Errors))
		}
		fmt.Fprintf(o.stdout, "  volume %s: snapshot %s, %d files, %s read back: %s\n", vol.Volume, vol.SnapshotID, vol.Files, humanBytes(vol.Bytes), state)
		for _, e := range vol.Errors {
			fmt.Fprintf(o.stdout, "    %s\n", e)
		}
	}
	return nil
}
