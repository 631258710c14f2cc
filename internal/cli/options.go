package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// command is a command's options in kubectl's shape (pkg/cmd/rollout,
// pkg/cmd/delete): Complete fills in what the flags, arguments and
// environment imply (it may read files, never a cluster or the store),
// Validate checks the combination without any I/O, and Run does the work
// and then prints its result as a separate step. ctx is Run's parameter:
// no options struct keeps one.
type command interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// runE is the RunE of a command with options o.
func runE(o command) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		if cmd.Context().Value(validateOnly{}) != nil {
			return nil
		}
		return o.Run(cmd.Context())
	}
}

// validateOnly, as a context key, stops commands after Validate: the unit
// tests check flags through NewRoot that way, with no cluster or store.
type validateOnly struct{}

// changedFlags returns which of names were set on the command line
// (inherited flags included), in the order given, for Validate to check
// without the command.
func changedFlags(cmd *cobra.Command, names ...string) []string {
	var changed []string
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			changed = append(changed, n)
		}
	}
	return changed
}
