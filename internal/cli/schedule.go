package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/schedule"
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

// scheduleCreateOptions are schedule create's.
type scheduleCreateOptions struct {
	*globals
	namespace           *string
	selection           backupFlags
	crypt               cryptFlags
	cron, location      string
	ttl                 time.Duration
	paused, defaultToFS bool

	s *v1alpha1.Schedule
}

func newScheduleCreateCmd(g *globals, namespace *string) *cobra.Command {
	o := &scheduleCreateOptions{globals: g, namespace: namespace}
	cmd := &cobra.Command{
		Use:   "create NAME --schedule CRON",
		Short: "Create a Schedule: a Backup named NAME-<YYYYMMDDhhmmss> each time CRON comes due",
		Args:  cobra.ExactArgs(1),
		RunE:  runE(o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.cron, "schedule", "", "cron expression, UTC (robfig/cron: five fields, or @hourly, @daily, @every 1h) (required)")
	fl.StringVar(&o.location, "storage-location", "", "the BackupStorageLocation (default: the one marked default)")
	fl.DurationVar(&o.ttl, "ttl", 0, "delete each backup (store and cluster) this long after it starts (default: keep)")
	fl.BoolVar(&o.defaultToFS, "default-volumes-to-fs-backup", false, "back up the data of every pod volume through the node agents (the same exclusions as for backup create); without it, only the volumes named in a pod's "+v1alpha1.AnnotationBackupVolumes+" annotation")
	fl.BoolVar(&o.paused, "paused", false, "create it paused")
	_ = cmd.MarkFlagRequired("schedule")
	o.selection.register(cmd)
	o.crypt.registerRecipients(cmd)
	return cmd
}

func (o *scheduleCreateOptions) Complete(_ *cobra.Command, args []string) error {
	o.s = &v1alpha1.Schedule{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Schedule"}, ObjectMeta: metav1.ObjectMeta{Name: args[0], Namespace: *o.namespace}}
	o.s.Spec.Schedule = o.cron
	o.s.Spec.Template = newBackupSpec(&o.selection, &o.crypt, nil, o.defaultToFS)
	o.s.Spec.Template.StorageLocationName = o.location
	o.s.Spec.Paused = o.paused
	if o.ttl > 0 {
		o.s.Spec.TTL = &metav1.Duration{Duration: o.ttl}
	}
	return nil
}

func (o *scheduleCreateOptions) Validate() error {
	if _, err := schedule.Parse(o.cron); err != nil {
		return fmt.Errorf("--schedule %q: %v", o.cron, err)
	}
	if err := o.crypt.validate(); err != nil {
		return err
	}
	if o.ttl < 0 {
		return fmt.Errorf("--ttl %s is negative (omit it to keep the backups)", o.ttl)
	}
	if err := schedule.ValidateName(o.s.Name); err != nil {
		return err
	}
	// The template's spec as each Backup will have it (the name is the
	// schedule's, with a timestamp).
	return (backup.Options{Name: o.s.Name, Spec: o.s.Spec.Template}).Validate()
}

func (o *scheduleCreateOptions) Run(ctx context.Context) error {
	c, err := serverClient(o.globals)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, o.s); err != nil {
		return fmt.Errorf("creating Schedule %s/%s: %w", o.s.Namespace, o.s.Name, err)
	}
	return o.print()
}

func (o *scheduleCreateOptions) print() error {
	if o.output != "table" {
		return printObject(o.stdout, o.output, o.s)
	}
	fmt.Fprintf(o.stdout, "Schedule %s created in namespace %s (%s)\n", o.s.Name, o.s.Namespace, o.cron)
	return nil
}

// scheduleOptions are those of schedule get, pause, unpause and delete:
// the server's namespace and, but for a get of every schedule, a name.
type scheduleOptions struct {
	*globals
	namespace *string
	name      string
}

func (o *scheduleOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.name = args[0]
	}
	return nil
}

func (o *scheduleOptions) Validate() error { return nil }

// scheduleGetOptions are schedule get's.
type scheduleGetOptions struct{ scheduleOptions }

func newScheduleGetCmd(g *globals, namespace *string) *cobra.Command {
	o := &scheduleGetOptions{scheduleOptions{globals: g, namespace: namespace}}
	return &cobra.Command{
		Use:   "get [NAME]",
		Short: "List Schedules, with phase, last and next backup",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runE(o),
	}
}

func (o *scheduleGetOptions) Run(ctx context.Context) error {
	c, err := serverClient(o.globals)
	if err != nil {
		return err
	}
	ns := *o.namespace
	var items []v1alpha1.Schedule
	if o.name != "" {
		s := &v1alpha1.Schedule{}
		if err := c.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: o.name}, s); err != nil {
			return fmt.Errorf("schedule %s/%s: %w", ns, o.name, err)
		}
		items = append(items, *s)
	} else {
		list := &v1alpha1.ScheduleList{}
		if err := c.List(ctx, list, crclient.InNamespace(ns)); err != nil {
			return err
		}
		items = list.Items
	}
	return o.print(items)
}

func (o *scheduleGetOptions) print(items []v1alpha1.Schedule) error {
	if o.output != "table" {
		if o.name != "" {
			return printObject(o.stdout, o.output, &items[0])
		}
		if items == nil {
			items = []v1alpha1.Schedule{}
		}
		return printObject(o.stdout, o.output, list(items))
	}
	tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
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
}

// schedulePauseOptions are schedule pause's and unpause's.
type schedulePauseOptions struct {
	scheduleOptions
	verb   string
	paused bool
}

func newSchedulePauseCmd(g *globals, namespace *string, verb string, paused bool) *cobra.Command {
	o := &schedulePauseOptions{scheduleOptions{globals: g, namespace: namespace}, verb, paused}
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: map[bool]string{true: "Stop a Schedule from creating Backups", false: "Let a paused Schedule create Backups again (missed runs are not made up)"}[paused],
		Args:  cobra.ExactArgs(1),
		RunE:  runE(o),
	}
}

func (o *schedulePauseOptions) Run(ctx context.Context) error {
	c, err := serverClient(o.globals)
	if err != nil {
		return err
	}
	s := &v1alpha1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: *o.namespace, Name: o.name}}
	patch := fmt.Sprintf(`{"spec":{"paused":%t}}`, o.paused)
	if err := c.Patch(ctx, s, crclient.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("schedule %s/%s: %w", *o.namespace, o.name, err)
	}
	fmt.Fprintf(o.stdout, "Schedule %s %sd\n", o.name, o.verb)
	return nil
}

// scheduleDeleteOptions are schedule delete's.
type scheduleDeleteOptions struct{ scheduleOptions }

func newScheduleDeleteCmd(g *globals, namespace *string) *cobra.Command {
	o := &scheduleDeleteOptions{scheduleOptions{globals: g, namespace: namespace}}
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a Schedule (its backups stay)",
		Args:  cobra.ExactArgs(1),
		RunE:  runE(o),
	}
}

func (o *scheduleDeleteOptions) Run(ctx context.Context) error {
	c, err := serverClient(o.globals)
	if err != nil {
		return err
	}
	s := &v1alpha1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: *o.namespace, Name: o.name}}
	if err := c.Delete(ctx, s); err != nil {
		return fmt.Errorf("schedule %s/%s: %w", *o.namespace, o.name, err)
	}
	fmt.Fprintf(o.stdout, "Schedule %s deleted\n", o.name)
	return nil
}
