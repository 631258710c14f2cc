// Package cli is ferry's command line: one file per command group. Each
// command has an options struct in kubectl's shape (see command in
// options.go): Complete turns flags into engine options, Validate checks
// them without I/O, Run runs the engine and then prints. Flag groups
// (backupFlags, restoreFlags, imageModeFlags, cryptFlags, volumeFlags,
// serverMode) become specs in one place: newBackupSpec and newRestoreSpec.
// Results go to stdout, logs and progress to stderr.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/store"
)

// Exit codes (issue 2 "CLI contract").
const (
	ExitOK              = 0
	ExitFailed          = 1
	ExitPartiallyFailed = 2
	// ExitInterrupted is 128+SIGINT, as shells report an interrupted command.
	ExitInterrupted = 130
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// globals are the flags every command shares.
type globals struct {
	kubeconfig string
	context    string
	storage    string
	output     string
	verbose    bool
	stdout     io.Writer
	stderr     io.Writer
	log        *slog.Logger
	cpuProfile string
	stopProf   func()
}

// Main runs ferry with args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	err := flagNames(root.ExecuteContext(ctx))
	if err == nil {
		return ExitOK
	}
	if ctx.Err() != nil {
		// Interrupted (SIGINT/SIGTERM): say so, exit as shells expect.
		fmt.Fprintln(stderr, "ferry: interrupted:", err)
		return ExitInterrupted
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "ferry:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "Error:", err)
	return ExitFailed
}

// NewRoot builds the cobra command tree.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "ferry",
		Short: "Move a Kubernetes cluster to another cloud through object storage",
		Long: `ferry backs up every API object of a cluster into object storage and restores it
into another cluster, with nothing installed in either cluster.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPostRun: func(cmd *cobra.Command, args []string) {
			if g.stopProf != nil {
				g.stopProf()
			}
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if g.cpuProfile != "" {
				f, err := os.Create(g.cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				g.stopProf = func() { pprof.StopCPUProfile(); f.Close() }
			}
			level := slog.LevelWarn
			if g.verbose {
				level = slog.LevelInfo
			}
			g.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
			if !g.verbose {
				// client-go logs through klog; its messages (a canceled
				// request, say) would bury ferry's own.
				klog.SetLogger(logr.Discard())
			}
			switch g.output {
			case "table", "json", "yaml":
			default:
				return fmt.Errorf("-o %q: want table, json or yaml", g.output)
			}
			if g.storage == "" {
				g.storage = os.Getenv(store.EnvStorage)
			}
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	pf.StringVar(&g.context, "context", "", "kubeconfig context to use (default the current context)")
	pf.StringVar(&g.storage, "storage", "", "backup storage location URL: file:///dir, s3://bucket?endpoint=..., gs://, azblob:// (env "+store.EnvStorage+"; default "+store.DefaultURL()+")")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "log progress details to stderr")
	pf.StringVar(&g.cpuProfile, "cpuprofile", "", "write a CPU profile to this file (for performance work)")
	_ = pf.MarkHidden("cpuprofile")
	root.AddCommand(newBackupCmd(g), newRestoreCmd(g), newMigrateCmd(g), newVerifyCmd(g), newImageCmd(g), newVersionCmd(g), newNodeAgentCmd(g), newVolumeHelperCmd())
	root.AddCommand(newServerCmd(g), newHubCmd(g), newInstallCmd(g), newUninstallCmd(g), newScheduleCmd(g))
	// A group command given an unknown subcommand is an error, not help and
	// exit 0 (ferry hub, which serves, has subcommands and a RunE of its own).
	for _, c := range root.Commands() {
		if c.HasSubCommands() && c.RunE == nil {
			c.Args = cobra.NoArgs
			c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
		}
	}
	return root
}

// openStore opens the backup storage location, with the encryption keys
// of cf when given.
func (g *globals) openStore(ctx context.Context, cf ...*cryptFlags) (*store.Location, error) {
	loc, err := store.Open(ctx, g.storage)
	if err != nil {
		return nil, err
	}
	for _, c := range cf {
		if err := c.apply(loc); err != nil {
			loc.Close()
			return nil, err
		}
	}
	return loc, nil
}

// connect loads a kubeconfig context and checks the API server answers.
func connect(ctx context.Context, kubeconfig, kubeContext string) (*kube.Cluster, error) {
	cfg, err := kube.RESTConfig(kubeconfig, kubeContext)
	if err != nil {
		return nil, err
	}
	name := kubeContext
	if name == "" {
		name = cfg.Host
	}
	return kube.Connect(ctx, name, cfg)
}

// defaultName returns prefix-YYYYMMDDhhmmss-mmm (milliseconds).
func defaultName(prefix string) string {
	now := time.Now().UTC()
	return fmt.Sprintf("%s-%s-%03d", prefix, now.Format("20060102150405"), now.Nanosecond()/1e6)
}

// parseMappings parses "a:b,c:d" (also "a=b") into a map.
func parseMappings(flag string, entries []string) (map[string]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, e := range entries {
		for _, pair := range strings.Split(e, ",") {
			pair = strings.TrimSpace(pair)
			if pair == "" {
				continue
			}
			src, dst, ok := strings.Cut(pair, ":")
			if !ok {
				src, dst, ok = strings.Cut(pair, "=")
			}
			if !ok || src == "" || dst == "" {
				return nil, fmt.Errorf("--%s %q: want SRC:DST", flag, pair)
			}
			if prev, dup := out[src]; dup && prev != dst {
				return nil, fmt.Errorf("--%s: %s is mapped twice (%s and %s)", flag, src, prev, dst)
			}
			out[src] = dst
		}
	}
	return out, nil
}

// versionOptions are version's.
type versionOptions struct{ *globals }

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print ferry's version",
		Args:  cobra.NoArgs,
		RunE:  runE(&versionOptions{g}),
	}
}

func (o *versionOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *versionOptions) Validate() error { return nil }

func (o *versionOptions) Run(context.Context) error {
	fmt.Fprintln(o.stdout, "ferry", Version)
	return nil
}

// Version is set at build time with -ldflags "-X .../internal/cli.Version=...".
var Version = "dev"
