package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/restore"
)

// restoreDeleteOptions are restore delete's.
type restoreDeleteOptions struct {
	*globals
	name string
}

func newRestoreDeleteCmd(g *globals) *cobra.Command {
	o := &restoreDeleteOptions{globals: g}
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a restore's records (status and results) from the backup storage location; the restored objects stay",
		Args:  cobra.ExactArgs(1),
		RunE:  runE(o),
	}
}

func (o *restoreDeleteOptions) Complete(_ *cobra.Command, args []string) error {
	o.name = args[0]
	return nil
}

func (o *restoreDeleteOptions) Validate() error { return nil }

func (o *restoreDeleteOptions) Run(ctx context.Context) error {
	loc, err := o.openStore(ctx)
	if err != nil {
		return err
	}
	defer loc.Close()
	if r, err := loc.GetRestore(ctx, o.name); err == nil && r.Status.Phase == v1alpha1.PhaseInProgress && !restore.Interrupted(r, time.Now()) {
		return fmt.Errorf("restore %s is running (its record is InProgress, last heartbeat at %s): wait for it to end, or stop it; a record whose heartbeat is over a minute old is Interrupted, and can be deleted", o.name, tsString(r.Status.HeartbeatTime))
	}
	if err := loc.DeleteRestore(ctx, o.name); err != nil {
		return err
	}
	o.print(loc.URL())
	return nil
}

func (o *restoreDeleteOptions) print(url string) {
	fmt.Fprintf(o.stdout, "Restore %s deleted from %s (the objects it restored are not touched)\n", o.name, url)
}
