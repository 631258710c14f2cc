package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// newVolumeHelperCmd is what ferry's volume helper pods run: one job from
// $FERRY_VOLUME_JOB, its outcome written to the termination message.
func newVolumeHelperCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "volume-helper",
		Short:  "Run one volume job inside a helper pod (started by ferry backup, restore and migrate)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var job volumes.HelperJob
			if err := json.Unmarshal([]byte(os.Getenv(volumes.EnvHelperJob)), &job); err != nil {
				return fmt.Errorf("$%s: %w", volumes.EnvHelperJob, err)
			}
			out := volumes.RunHelperJob(cmd.Context(), job, cmd.OutOrStdout())
			b, err := json.Marshal(out)
			if err != nil {
				return err
			}
			path := helperpod.TerminationMessagePath
			if p := os.Getenv("FERRY_TERMINATION_MESSAGE"); p != "" {
				path = p
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				return fmt.Errorf("writing the outcome: %w", err)
			}
			if (out.Backup != nil && out.Backup.Error != "") || (out.Restore != nil && out.Restore.Error != "") {
				cmd.SilenceUsage = true
				return fmt.Errorf("%s", string(b))
			}
			return nil
		},
	}
}
