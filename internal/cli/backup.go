package cli

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/store"
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
	fl.StringVar(&f.includeCluster, "include-cluster-resources", "auto", "cluster-scoped resources: auto (all for a whole-cluster backup, only referenced ones for a namespace-filtered one), true or false")
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

func newBackupCreateCmd(g *globals) *cobra.Command {
	var f backupFlags
	var cf cryptFlags
	var imf imageModeFlags
	var vf volumeFlags
	var sm serverMode
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Back up the cluster's API objects into the backup storage location",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := backup.ValidateName(args[0]); err != nil {
				return err
			}
			if err := cf.validate(); err != nil {
				return err
			}
			iopts, err := imf.options()
			if err != nil {
				return err
			}
			if on, err := sm.enabled(g, cmd); err != nil {
				return err
			} else if on {
				spec := f.spec()
				spec.EncryptionRecipients = cf.recipients
				imf.applyBackup(&spec)
				spec.DefaultVolumesToFsBackup = vf.defaultToFS
				return sm.createBackupCR(ctx, g, args[0], spec)
			}
			if err := vf.validate(); err != nil {
				return err
			}
			if err := imf.checkPlatforms(false); err != nil {
				return err
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
			pv, closeVolumes, err := vf.backupOptions(ctx, loc, cluster, g.log)
			if err != nil {
				return err
			}
			pr := newProgress(g.stderr, "backup "+args[0])
			dp := &dataProgress{}
			if pv != nil && pv.Repository != nil {
				dp = pr.dataBar("volume data")
				pv.OnProgress = dp.update
				vf.showVolumes(dp)
			}
			spec := f.spec()
			spec.EncryptionRecipients = cf.recipients
			imf.applyBackup(&spec)
			spec.DefaultVolumesToFsBackup = vf.defaultToFS
			b, res, err := backup.Run(ctx, cluster, loc, backup.Options{Name: args[0], Spec: spec, Log: g.log, OnProgress: pr.update, Images: iopts, PodVolumes: pv})
			dp.stop()
			pr.stop()
			closeVolumes()
			if err != nil {
				return err
			}
			if err := printBackup(g, b, res); err != nil {
				return err
			}
			return phaseExit(b.Status.Phase, "backup "+b.Name)
		},
	}
	f.register(cmd)
	cf.registerRecipients(cmd)
	imf.registerBackup(cmd)
	imf.registerMappings(cmd, false)
	imf.register(cmd, "image-concurrency")
	vf.registerBackup(cmd)
	sm.register(cmd, true)
	return cmd
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
	if res != nil {
		printProblems(g, res)
	}
	return nil
}

func printProblems(g *globals, res *report.Results) {
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

func newBackupGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get [NAME]",
		Short: "List backups in the backup storage location, complete or not",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			loc, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer loc.Close()
			backups := []*v1alpha1.Backup{}
			if len(args) == 1 {
				b, err := loc.GetBackup(ctx, args[0])
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
			if g.output != "table" {
				if len(args) == 1 {
					return printObject(g.stdout, g.output, backups[0])
				}
				return printObject(g.stdout, g.output, list(backups))
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
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
		},
	}
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

func newBackupDescribeCmd(g *globals) *cobra.Command {
	var details bool
	var cf cryptFlags
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a backup's spec, status, resource counts, warnings and errors",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			loc, err := g.openStore(ctx, &cf)
			if err != nil {
				return err
			}
			defer loc.Close()
			b, err := loc.GetBackup(ctx, args[0])
			if err != nil && !errors.Is(err, store.ErrIncomplete) {
				return err
			}
			res := &report.Results{}
			if err := loc.GetJSON(ctx, store.BackupResultsKey(b.Name), res); errors.Is(err, store.ErrEncrypted) {
				res.Warnf("the results are encrypted: pass --encryption-identity FILE to see them")
			} else if err != nil && !errors.Is(err, store.ErrNotFound) {
				res.Warnf("the results cannot be read: %v", err)
			}
			if g.output != "table" {
				out := map[string]any{"backup": b, "results": res}
				if details {
					// The archive's entries, read and verified (paths included).
					a, _, err := backup.Load(ctx, loc, b.Name)
					if err != nil {
						return err
					}
					entries := make([]archive.Entry, len(a.Items))
					for i, it := range a.Items {
						entries[i] = it.Entry
					}
					out["entries"] = entries
				}
				return printObject(g.stdout, g.output, out)
			}
			w := g.stdout
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
			if a := b.Status.Archive; a != nil {
				fmt.Fprintf(w, "Archive:      %s, %s, sha256:%s\n", a.Key, humanBytes(a.Size), a.SHA256)
			}
			if im := b.Status.Images; im != nil {
				fmt.Fprintf(w, "Images:       %s: %d images, %d failed; %s, sha256:%s\n", im.Mode, im.Images, im.Failed, im.Key, im.SHA256)
				if im.IndexKey != "" {
					fmt.Fprintf(w, "Image bundle: %s; %d blobs written (%s), %d already in the store\n", im.IndexKey, im.BlobsWritten, humanBytes(im.BytesWritten), im.BlobsReused)
				}
			}
			printPodVolumes(w, b.Status.PodVolumes, "backed up")
			if b.Status.PodVolumes != nil {
				if rec, err := backupVolumeRecord(ctx, loc, b.Name); err != nil {
					res.Warnf("the pod volume records cannot be read: %v", err)
				} else if rec != nil {
					printVolumeRecord(w, rec)
				}
			}
			if len(b.Status.ResourceCounts) > 0 {
				fmt.Fprintln(w, "Resource counts:")
				keys := make([]string, 0, len(b.Status.ResourceCounts))
				for k := range b.Status.ResourceCounts {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					fmt.Fprintf(w, "  %-50s %d\n", k, b.Status.ResourceCounts[k])
				}
			}
			printProblems(g, res)
			if !details {
				return nil
			}
			// The item list is the archive's manifest, read and verified.
			a, _, err := backup.Load(ctx, loc, b.Name)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "\nRESOURCE\tVERSION\tNAMESPACE\tNAME\tSIZE")
			for _, it := range a.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", it.GroupResource(), it.Version, orDash(it.Namespace), it.Name, it.Size)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&details, "details", false, "list every item of the archive (reads and verifies it)")
	cf.registerIdentity(cmd)
	return cmd
}

func newBackupDeleteCmd(g *globals) *cobra.Command {
	var vf volumeFlags
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a backup (complete or interrupted) from the backup storage location, with its volume snapshots",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			loc, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer loc.Close()
			n, err := vf.deleteBackup(ctx, loc, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "Backup %s deleted from %s\n", args[0], loc.URL())
			if n > 0 {
				fmt.Fprintf(g.stdout, "  with %d volume snapshots\n", n)
			}
			return nil
		},
	}
	vf.registerPassword(cmd)
	return cmd
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

func newBackupVerifyCmd(g *globals) *cobra.Command {
	var cf cryptFlags
	var vf volumeFlags
	cmd := &cobra.Command{
		Use:   "verify NAME",
		Short: "Check a backup's archive, images file and image bundle against its manifest, commit marker and digests, without restoring it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			loc, err := g.openStore(ctx, &cf)
			if err != nil {
				return err
			}
			defer loc.Close()
			a, b, err := backup.Load(ctx, loc, args[0])
			if err != nil {
				return err
			}
			// The images file, and every blob of a bundle.
			var imgs map[string]any
			if b.Status.Images != nil {
				rec, err := images.LoadRecord(ctx, loc, b)
				if err != nil {
					return err
				}
				blobs, size, err := images.NewBundle(loc).Verify(ctx, rec)
				if err != nil {
					return fmt.Errorf("backup %s: image bundle: %w", b.Name, err)
				}
				imgs = map[string]any{"key": b.Status.Images.Key, "images": len(rec.Images), "bundleBlobs": blobs, "bundleBytes": size}
			}
			vols, err := vf.verifyVolumes(ctx, loc, b.Name)
			if err != nil {
				return err
			}
			bad := 0
			for _, v := range vols {
				bad += len(v.Errors)
			}
			if g.output != "table" {
				if err := printObject(g.stdout, g.output, map[string]any{"backup": b.Name, "verified": bad == 0, "items": len(a.Items), "archive": b.Status.Archive, "images": imgs, "volumes": vols}); err != nil {
					return err
				}
			} else {
				state := "verified"
				if bad > 0 {
					state = "damaged volume data"
				}
				fmt.Fprintf(g.stdout, "Backup %s %s: %d items, archive %s (%s, sha256:%s) matches its manifest and commit\n",
					b.Name, state, len(a.Items), b.Status.Archive.Key, humanBytes(b.Status.Archive.Size), b.Status.Archive.SHA256)
				if imgs != nil {
					fmt.Fprintf(g.stdout, "Images file %s matches its commit: %d images; %d bundled blobs (%s) match their digests\n", imgs["key"], imgs["images"], imgs["bundleBlobs"], humanBytes(imgs["bundleBytes"].(int64)))
				}
				for _, v := range vols {
					state := "verified"
					if len(v.Errors) > 0 {
						state = fmt.Sprintf("DAMAGED (%d errors)", len(v.Errors))
					}
					fmt.Fprintf(g.stdout, "  volume %s: snapshot %s, %d files, %s read back: %s\n", v.Volume, v.SnapshotID, v.Files, humanBytes(v.Bytes), state)
					for _, e := range v.Errors {
						fmt.Fprintf(g.stdout, "    %s\n", e)
					}
				}
			}
			if bad > 0 {
				return &exitError{code: ExitFailed, msg: fmt.Sprintf("backup %s: %d volume data errors", b.Name, bad)}
			}
			return nil
		},
	}
	cf.registerIdentity(cmd)
	vf.registerPassword(cmd)
	return cmd
}
