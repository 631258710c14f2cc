package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
		if err := emptyListFlags(cmd); err != nil {
			return err
		}
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

// emptyListFlags refuses a list flag given with an empty value: an unset
// shell variable in --include-namespaces "$NS" would otherwise read as no
// filter at all, and back up every namespace.
func emptyListFlags(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if sv, ok := f.Value.(pflag.SliceValue); ok && err == nil && len(sv.GetSlice()) == 0 {
			err = fmt.Errorf("--%s \"\": names nothing; leave the flag out for its default", f.Name)
		}
	})
	return err
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
