package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/preflight"
	"github.com/kubeferry/ferry/pkg/report"
)

// preflightTop is how many risks the terminal summary lists.
const preflightTop = 10

// validatePreflight refuses what --preflight cannot be combined with.
func (o *migrateOptions) validatePreflight() error {
	switch {
	case !o.preflight:
		return nil
	case o.hub.on():
		return fmt.Errorf("--preflight runs here, not in the hub: drop --hub (and unset $%s) to check from this machine", EnvHubKubeconfig)
	case o.rspec.DryRun:
		return fmt.Errorf("--preflight sends every object as a dry-run create already: drop --dry-run")
	}
	return nil
}

// runPreflight checks the migration without running it
// (preflight.Run): it writes nothing to either cluster or the location,
// prints the summary (or the report as JSON with -o json), keeps
// preflight.json and preflight.html in the report folder, and exits 2
// when a risk is a blocker.
func (o *migrateOptions) runPreflight(ctx context.Context) error {
	removeEmpty, err := checkReportDir(o.reportDir)
	if err != nil {
		return err
	}
	defer removeEmpty()
	iopts, err := o.images.options()
	if err != nil {
		return err
	}
	src, dst, err := o.connect(ctx)
	if err != nil {
		return err
	}
	p, err := preflight.Run(ctx, preflight.Options{
		Source: src, Target: dst,
		Backup:  backup.Options{Spec: o.bspec, Log: o.log},
		Restore: o.restoreOptions(iopts), Images: iopts,
		VolumeData: true, HelperImage: o.volumes.helperImage,
		Estimate: true, Log: o.log,
	})
	if err != nil {
		return err
	}
	jsonPath, htmlPath, err := writePreflight(p, o.reportDir)
	if err != nil {
		return err
	}
	if o.output == "json" {
		err = p.WriteJSON(o.stdout)
	} else {
		err = p.WriteSummary(o.stdout, preflightTop)
		fmt.Fprintf(o.stdout, "\nReport: %s (%s)\n", htmlPath, jsonPath)
	}
	if err != nil {
		return err
	}
	if p.Blocked() {
		return &exitError{code: ExitPartiallyFailed, msg: fmt.Sprintf("pre-flight of migration %s: %d blocker(s): see %s", o.name, p.Counts[report.Blocker], htmlPath)}
	}
	return nil
}

// writePreflight keeps the report in dir as preflight.json and
// preflight.html.
func writePreflight(p *report.Preflight, dir string) (jsonPath, htmlPath string, err error) {
	jsonPath, htmlPath = filepath.Join(dir, "preflight.json"), filepath.Join(dir, "preflight.html")
	for _, f := range []struct {
		path  string
		write func(*os.File) error
	}{
		{jsonPath, func(f *os.File) error { return p.WriteJSON(f) }},
		{htmlPath, func(f *os.File) error { return p.WriteHTML(f) }},
	} {
		out, err := os.Create(f.path)
		if err != nil {
			return "", "", err
		}
		if err := f.write(out); err != nil {
			out.Close()
			return "", "", err
		}
		if err := out.Close(); err != nil {
			return "", "", err
		}
	}
	return jsonPath, htmlPath, nil
}
