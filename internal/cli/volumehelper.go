package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/helperpod"
)

// volumeHelperOptions are what ferry's volume helper pods run, in
// kubectl's shape: Complete reads the job from $FERRY_VOLUME_JOB, Run does
// it and writes its outcome to the termination message.
type volumeHelperOptions struct {
	job helperpod.Job
	// terminationPath is where the outcome goes ($FERRY_TERMINATION_MESSAGE,
	// default the pod's termination message path).
	terminationPath string
	out             io.Writer
}

// newVolumeHelperCmd is what ferry's volume helper pods run: one job from
// $FERRY_VOLUME_JOB, its outcome written to the termination message.
func newVolumeHelperCmd() *cobra.Command {
	o := &volumeHelperOptions{}
	return &cobra.Command{
		Use:    "volume-helper",
		Short:  "Run one volume job inside a helper pod (started by ferry backup, restore and migrate)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   runE(o),
	}
}

// Complete reads the job and where its outcome goes from the environment.
func (o *volumeHelperOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.out = cmd.OutOrStdout()
	if err := json.Unmarshal([]byte(os.Getenv(helperpod.EnvJob)), &o.job); err != nil {
		return fmt.Errorf("$%s: %w", helperpod.EnvJob, err)
	}
	o.terminationPath = helperpod.TerminationMessagePath
	if p := os.Getenv("FERRY_TERMINATION_MESSAGE"); p != "" {
		o.terminationPath = p
	}
	return nil
}

// Validate has nothing to check: helperpod.RunJob reports a bad job
// in its outcome.
func (o *volumeHelperOptions) Validate() error { return nil }

// Run does the job and writes its outcome (JSON) to the termination
// message; a job that failed is a jobFailed error holding the outcome.
func (o *volumeHelperOptions) Run(ctx context.Context) error {
	out := helperpod.RunJob(ctx, o.job, o.out)
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.terminationPath, b, 0o644); err != nil {
		return fmt.Errorf("writing the outcome: %w", err)
	}
	if (out.Backup != nil && out.Backup.Error != "") || (out.Restore != nil && out.Restore.Error != "") || (out.Error != "" && o.job.Op == helperpod.OpProbe) {
		return jobFailed(b)
	}
	return nil
}

// jobFailed is the outcome (JSON) of a helper job that failed.
type jobFailed string

func (e jobFailed) Error() string { return string(e) }
