package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubeferry/ferry/pkg/backup"
	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/preflight"
	"github.com/kubeferry/ferry/pkg/report"
)

// preflightTop is how many risks the terminal summary lists.
const preflightTop = 10

// validatePreflight refuses what --preflight cannot be combined with.
func (o *migrateOptions) validatePreflight() error {
	switch {
	case o.pullProbe && (!o.preflight || o.hub.on()):
		return fmt.Errorf("--preflight-pull-probe goes with --preflight, run here (not --hub)")
	case !o.preflight:
		return nil
	case o.rspec.DryRun:
		return fmt.Errorf("--preflight sends every object as a dry-run create already: drop --dry-run")
	case o.hub.on():
		return nil // the hub's Migration of spec.preflightOnly; -o prints it
	}
	return validatePreflightOutput(o.output)
}

// validatePreflightOutput refuses an output format the report has not.
func validatePreflightOutput(output string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("-o %s: a pre-flight prints a summary (-o table) or JSON (-o json)", output)
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
	ropts := o.restoreOptions(iopts)
	ropts.Deadline = o.deadlines.restoreDeadline()
	p, err := preflight.Run(ctx, preflight.Options{
		Source: src, Target: dst,
		Backup:  backup.Options{Spec: o.bspec, Log: o.log, Deadline: o.deadlines.backupDeadline()},
		Restore: ropts, Images: iopts,
		HelperImage: o.volumes.helperImage, Estimate: true, Log: o.log,
		VolumeProbe: o.volumes.probe(o.storage, true, o.volumeProbe, o.log), PullProbe: o.pullProbe,
	}.WithVolumeData(o.volumes.preflight()))
	if err != nil {
		return err
	}
	return printPreflight(o.globals, p, o.reportDir, "migration "+o.name)
}

// printPreflight prints the report (the summary, or JSON with -o json),
// keeps it in dir, and exits 2 when a risk is a blocker. A report that
// cannot be kept is a warning after it was printed: what was found is
// never lost to a file error.
func printPreflight(g *globals, p *report.Preflight, dir, what string) error {
	for i := range p.Risks {
		p.Risks[i].What, p.Risks[i].Fix = flagText(p.Risks[i].What), flagText(p.Risks[i].Fix)
	}
	jsonPath, htmlPath, werr := writePreflight(p, dir)
	var err error
	if g.output == "json" {
		err = p.WriteJSON(g.stdout)
	} else {
		err = p.WriteSummary(g.stdout, preflightTop)
		if werr == nil {
			fmt.Fprintf(g.stdout, "\nReport: %s (%s)\n", htmlPath, jsonPath)
		}
	}
	if err != nil {
		return err
	}
	if werr != nil {
		fmt.Fprintf(g.stderr, "warning: the pre-flight report could not be kept in %s: %v\n", dir, werr)
		htmlPath = "the output above"
	}
	if p.Blocked() {
		return &exitError{code: ExitPartiallyFailed, msg: fmt.Sprintf("pre-flight of %s: %d blocker(s): see %s", what, p.Counts[report.Blocker], htmlPath)}
	}
	return nil
}

// runPreflight of restore create checks the restore of a stored backup
// into the cluster (preflight.Run without a source), writing nothing; the
// report goes to the restore's report folder.
func (o *restoreCreateOptions) runPreflight(ctx context.Context) error {
	if err := validatePreflightOutput(o.output); err != nil {
		return err
	}
	dir := defaultReportDir(o.name)
	removeEmpty, err := checkReportDir(dir)
	if err != nil {
		return err
	}
	defer removeEmpty()
	iopts, err := o.images.options()
	if err != nil {
		return err
	}
	loc, err := o.openStore(ctx, &o.crypt)
	if err != nil {
		return err
	}
	defer loc.Close()
	cluster, err := connect(ctx, o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	p, err := preflight.Run(ctx, preflight.Options{
		Target: cluster, Location: loc, Restore: o.options(iopts), Images: iopts,
		HelperImage: o.volumes.helperImage, Estimate: true, Log: o.log,
		VolumeProbe: o.volumes.probe(loc.SecretURL(), false, o.volumeProbe, o.log), PullProbe: o.pullProbe,
	}.WithVolumeData(o.volumes.preflight()))
	if err != nil {
		return err
	}
	return printPreflight(o.globals, p, dir, "restore "+o.name)
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

// priorEstimate is the time estimate of a pre-flight of this migration
// (migrate --preflight with the same --name and --report-dir, between the
// same clusters), for the report to show against the actual times; nil
// when there is none.
func (o *migrateOptions) priorEstimate(srcHost, dstHost string) *report.Estimate {
	f, err := os.Open(filepath.Join(o.reportDir, "preflight.json"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var p report.Preflight
	if err := json.NewDecoder(f).Decode(&p); err != nil || p.Estimate == nil || p.Source != srcHost || p.Target != dstHost {
		return nil
	}
	fmt.Fprintf(o.stderr, "The report compares the pre-flight's estimate of %s (%s) with the actual times\n", p.Created.Format(time.RFC3339), durationString(p.Estimate.Seconds))
	return p.Estimate
}

func durationString(secs float64) string {
	return time.Duration(secs * float64(time.Second)).Round(time.Second).String()
}

// printPreflightStatus prints what a spec.preflightOnly Migration of the
// hub found: the counts, the estimate, the first risks.
func printPreflightStatus(g *globals, p *hubv1beta1.MigrationPreflight) {
	fmt.Fprintf(g.stdout, "Pre-flight of %d object(s): %d blocker(s), %d warning(s), %d note(s)\n", p.Objects, p.Blockers, p.Warnings, p.Notes)
	if p.Estimate != nil {
		var parts []string
		for _, pt := range p.EstimateParts {
			parts = append(parts, pt.Step+" "+pt.Duration.Round(100*time.Millisecond).String())
		}
		fmt.Fprintf(g.stdout, "  estimated time: %s (%s)\n", p.Estimate.Round(100*time.Millisecond), strings.Join(parts, ", "))
	}
	for _, s := range p.Skipped {
		fmt.Fprintf(g.stdout, "  not checked: %s\n", s)
	}
	for i, r := range p.Risks {
		if i == preflightTop {
			fmt.Fprintf(g.stdout, "\n(%d more in status.preflight.risks)\n", len(p.Risks)-i)
			break
		}
		objs := strings.Join(r.Objects, ", ")
		if more := int(r.ObjectCount) - len(r.Objects); more > 0 {
			objs += fmt.Sprintf(" and %d more", more)
		}
		fmt.Fprintf(g.stdout, "\n%-8s %s: %s\n  %s\n", strings.ToUpper(r.Severity), r.Check, objs, r.What)
		if r.Fix != "" {
			fmt.Fprintf(g.stdout, "  fix: %s\n", r.Fix)
		}
	}
}

// preflight says how this command would move pod volume data: through
// helper pods, and why none moves ("" when some does).
// probe is the volume probe of a pre-flight through location url, by the
// helper pods of these flags (source: a migrate's two clusters; else the
// target only); nil when no helper pod moves the data, or on is false
// (--preflight-volume-probe=false).
func (f *volumeFlags) probe(url string, source, on bool, log *slog.Logger) *preflight.VolumeProbe {
	pw, err := readPassword(f.passwordFile)
	if !on || err != nil || f.hostPodsDir != "" || f.byNodeAgent {
		return nil
	}
	vp := &preflight.VolumeProbe{URL: url, Target: f.settings(pw, log)}
	if source {
		vp.Source = vp.Target
	}
	if f.toNodePodsDir != "" {
		vp.Target.NodePodsDir = f.toNodePodsDir
	}
	return vp
}

func (f *volumeFlags) preflight() (helperPods bool, none string) {
	if _, err := readPassword(f.passwordFile); err != nil {
		return false, err.Error()
	}
	return f.hostPodsDir == "" && !f.byNodeAgent, ""
}
