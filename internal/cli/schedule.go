package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/controller"
)

// Schedules exist only in server mode: these commands always talk to the
// cluster of --kubeconfig/--context.
func newScheduleCmd(g *globals) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{Use: "schedule", Short: "Create, list, pause, unpause and delete backup schedules (server mode)"}
	cmd.PersistentFlags().StringVarP(&namespace, "namespace", "n", serverNamespace(), "the ferry server's namespace (env "+EnvNamespace+")")
	cmd.AddCommand(newScheduleCreateCmd(g, &namespace), newScheduleGetCmd(g, &namespace),
		newSchedulePauseCmd(g, &namespace, "pause", true), newSchedulePauseCmd(g, &namespace, "unpause", false),
		newScheduleDeleteCmd(g, &namespace))
	return cmd
}

func newScheduleCreateCmd(g *globals, namespace *string) *cobra.Command {
	var f backupFlags
	var cf cryptFlags
	var schedule, location string
	var ttl time.Duration
	var paused, defaultToFS bool
	cmd := &cobra.Command{
		Use:   "create NAME --schedule CRON",
		Short: "Create a Schedule: a Backup named NAME-<YYYYMMDDhhmmss> each time CRON comes due",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := controller.ParseSchedule(schedule); err != nil {
				return fmt.Errorf("--schedule %q: %v", schedule, err)
			}
			if err := cf.validate(); err != nil {
				return err
			}
			if ttl < 0 {
				return fmt.Errorf("--ttl %s is negative (omit it to keep the backups)", ttl)
			}
			c, err := serverClient(g)
			if err != nil {
				return err
			}
			s := &v1alpha1.Schedule{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Schedule"}, ObjectMeta: metav1.ObjectMeta{Name: args[0], Namespace: *namespace}}
			s.Spec.Schedule = schedule
			s.Spec.Template = f.spec()
			s.Spec.Template.EncryptionRecipients = cf.recipients
			s.Spec.Template.StorageLocationName = location
			s.Spec.Paused = paused
			s.Spec.Template.DefaultVolumesToFsBackup = defaultToFS
			if ttl > 0 {
				s.Spec.TTL = &metav1.Duration{Duration: ttl}
			}
			if err := c.Create(cmd.Context(), s); err != nil {
				return fmt.Errorf("creating Schedule %s/%s: %w", *namespace, args[0], err)
			}
			if g.output != "table" {
				return printObject(g.stdout, g.output, s)
			}
			fmt.Fprintf(g.stdout, "Schedule %s created in namespace %s (%s)\n", s.Name, s.Namespace, schedule)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&schedule, "schedule", "", "cron expression, UTC (robfig/cron: five fields, or @hourly, @daily, @every 1h) (required)")
	fl.StringVar(&location, "storage-location", "", "the BackupStorageLocation (default: the one marked default)")
	fl.DurationVar(&ttl, "ttl", 0, "delete each backup (store and cluster) this long after it starts (default: keep)")
	fl.BoolVar(&defaultToFS, "default-volumes-to-fs-backup", false, "back up the data of every pod volume through the node agents (the same exclusions as for backup create); without it, only the volumes named in a pod's "+v1alpha1.AnnotationBackupVolumes+" annotation")
	fl.BoolVar(&paused, "paused", false, "create it paused")
	_ = cmd.MarkFlagRequired("schedule")
	f.register(cmd)
	cf.registerRecipients(cmd)
	return cmd
}

func newScheduleGetCmd(g *globals, namespace *string) *cobra.Command {
	return &cobra.Command{
		Use:   "get [NAME]",
		Short: "List Schedules, with phase, last and next backup",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := serverClient(g)
			if err != nil {
				return err
			}
			var items []v1alpha1.Schedule
			if len(args) == 1 {
				s := &v1alpha1.Schedule{}
				if err := c.Get(cmd.Context(), crclient.ObjectKey{Namespace: *namespace, Name: args[0]}, s); err != nil {
					return fmt.Errorf("schedule %s/%s: %w", *namespace, args[0], err)
				}
				items = append(items, *s)
			} else {
				list := &v1alpha1.ScheduleList{}
				if err := c.List(cmd.Context(), list, crclient.InNamespace(*namespace)); err != nil {
					return err
				}
				items = list.Items
			}
			if g.output != "table" {
				if len(args) == 1 {
					return printObject(g.stdout, g.output, &items[0])
				}
				if items == nil {
					items = []v1alpha1.Schedule{}
				}
				return printObject(g.stdout, g.output, list(items))
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSCHEDULE\tPAUSED\tPHASE\tLAST BACKUP\tNEXT BACKUP\tTTL")
			for _, s := range items {
				ttl := "-"
				if s.Spec.TTL != nil {
					ttl = s.Spec.TTL.Duration.String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\t%s\t%s\n", s.Name, s.Spec.Schedule, s.Spec.Paused, orDash(string(s.Status.Phase)), tsString(s.Status.LastBackup), tsString(s.Status.NextBackup), ttl)
				for _, e := range s.Status.ValidationErrors {
					fmt.Fprintf(tw, "  error: %s\n", e)
				}
			}
			return tw.Flush()
		},
	}
}

func newSchedulePauseCmd(g *globals, namespace *string, verb string, paused bool) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: map[bool]string{true: "Stop a Schedule from creating Backups", false: "Let a paused Schedule create Backups again (missed runs are not made up)"}[paused],
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := serverClient(g)
			if err != nil {
				return err
			}
			s := &v1alpha1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: *namespace, Name: args[0]}}
			patch := fmt.Sprintf(`{"spec":{"paused":%t}}`, paused)
			if err := c.Patch(cmd.Context(), s, crclient.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				return fmt.Errorf("schedule %s/%s: %w", *namespace, args[0], err)
			}
			fmt.Fprintf(g.stdout, "Schedule %s %sd\n", args[0], verb)
			return nil
		},
	}
}

func newScheduleDeleteCmd(g *globals, namespace *string) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a Schedule (its backups stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := serverClient(g)
			if err != nil {
				return err
			}
			s := &v1alpha1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: *namespace, Name: args[0]}}
			if err := c.Delete(cmd.Context(), s); err != nil {
				return fmt.Errorf("schedule %s/%s: %w", *namespace, args[0], err)
			}
			fmt.Fprintf(g.stdout, "Schedule %s deleted\n", args[0])
			return nil
		},
	}
}
