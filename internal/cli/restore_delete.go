package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newRestoreDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a restore's records (status and results) from the backup storage location; the restored objects stay",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			loc, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer loc.Close()
			if err := loc.DeleteRestore(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "Restore %s deleted from %s (the objects it restored are not touched)\n", args[0], loc.URL())
			return nil
		},
	}
}
