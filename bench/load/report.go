package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
)

// ---------------------------------------------------------------- output

func logRun(r *Run) {
	logf("%s: %.1fs, %.0f objects/s, peak RSS %.0f MiB, CPU %.1fs, exit %d, %d backed up, %d created",
		r.Operation, r.Seconds, r.PerSecond, r.MaxRSSMiB, r.CPUSeconds, r.ExitCode, r.ItemsBackedUp, r.Created)
	if v := r.Verification; v != nil {
		logf("  verification: %.1fs, %d objects, %d match, %d unexpected", r.FerryVerifySeconds, v.Objects, v.Matched, v.Unexpected)
	}
	if p := r.Problems; p != nil {
		logf("  outcomes %v; %d warnings, %d errors", p.Outcomes, p.WarningsTotal, p.ErrorsTotal)
		for _, k := range sortedKeys(p.ByResource) {
			logf("  %6d  %s", p.ByResource[k], k)
		}
		for _, k := range sortedKeys(p.Skipped) {
			logf("  skipped %6d  %s (e.g. %q)", p.Skipped[k], k, p.SkippedExample[k])
		}
		for _, k := range sortedKeys(p.FailedByMessage) {
			logf("  FAILED %6d  %s", p.FailedByMessage[k], k)
		}
		for i, f := range p.Failed {
			if i == 10 {
				logf("  (the JSON result lists the first %d failed items)", len(p.Failed))
				break
			}
			logf("  FAILED %s", f)
		}
		for _, w := range p.Warnings {
			logf("  warning: %s", w)
		}
		for _, e := range p.Errors {
			logf("  error: %s", e)
		}
	}
	logChecks(r.Verify, r.Content)
	if r.Error != "" {
		logf("  ERROR: %s", r.Error)
	}
}

func logChecks(verify []Check, content *ContentCheck) {
	for _, c := range verify {
		logf("  verify %-12s source %6d target %6d %s", c.Kind, c.Source, c.Target, mark(c.OK))
	}
	if c := content; c != nil {
		logf("  verify content: %d sampled objects (every %d of each kind: %s), %d differ %s",
			c.Total, c.Every, fmtCounts(c.Sampled), c.MismatchTotal, mark(c.MismatchTotal == 0))
		for _, m := range c.Mismatches {
			logf("  DIFFERS %s", m)
		}
	}
}

func logReference(r *Reference) {
	logf("%s: %.1fs, %.0f objects/s, peak RSS %.0f MiB, CPU %.1fs, exit %d", r.Operation, r.Seconds, r.PerSecond, r.MaxRSSMiB, r.CPUSeconds, r.ExitCode)
	if x := r.Raw; x != nil {
		logf("  %s", describeRaw(x))
		for _, t := range x.Tiers {
			logf("  tier %-16s %6d objects %6.1fs", t.Name, t.Objects, t.Seconds)
		}
	}
	for _, d := range r.CountDiffs {
		logf("  count differs from ferry's backup: %s", d)
	}
	logChecks(r.Verify, r.Content)
	if r.Error != "" {
		logf("  ERROR: %s", r.Error)
	}
}

// describeRaw says what a raw reference did, in a few words.
func describeRaw(x *RawResult) string {
	if x.Tiers != nil {
		return fmt.Sprintf("%d objects created in %d tiers, %d goroutines per tier, %d retries; API work %.1fs",
			x.Created, len(x.Tiers), x.Workers, x.Retries, x.InnerSeconds)
	}
	return fmt.Sprintf("discovery %.2fs, %d resource versions (%d at other versions), %d streams, pages of %d: %d items (+%d at other versions), %d requests, %.1f MiB; API work %.1fs",
		x.DiscoverySeconds, x.Resources, x.OtherVersions, x.Workers, x.PageSize, x.Items, x.OtherItems, x.Requests, float64(x.Bytes)/(1<<20), x.InnerSeconds)
}

// Ratio is ferry's throughput against its raw reference's, for the same
// seeded objects: RawSeconds ÷ FerrySeconds.
type Ratio struct {
	Operation    string  `json:"operation"`
	Reference    string  `json:"reference"`
	FerrySeconds float64 `json:"ferrySeconds"`
	RawSeconds   float64 `json:"rawSeconds"`
	Ratio        float64 `json:"ratio"`
	// Target is the minimum ratio (0: none); Applies is false when
	// it is for larger runs than this one (the backup's, below
	// backupTargetFrom objects). Met is Ratio ≥ Target.
	Target  float64 `json:"target,omitempty"`
	Applies bool    `json:"applies"`
	Met     bool    `json:"met"`
	// MaxRSSMiB is ferry's peak RSS in the run, UnderRSSTarget whether it
	// is below Result.TargetMiB.
	MaxRSSMiB      float64 `json:"maxRSSMiB"`
	UnderRSSTarget bool    `json:"underRSSTarget"`
	// Note says why no ratio was computed.
	Note string `json:"note,omitempty"`
}

// ratios pairs each ferry run with its references: migrate with raw LIST
// + raw CREATE, backup with raw LIST, restore with raw CREATE.
func ratios(runs []*Run, refs []*Reference, objects int) []Ratio {
	run := map[string]*Run{}
	for _, r := range runs {
		run[r.Operation] = r
	}
	ref := map[string]*Reference{}
	for _, r := range refs {
		ref[r.Operation] = r
	}
	return []Ratio{
		newRatio("migrate", run["migrate"], 0, true, ref, "raw LIST", "raw CREATE"),
		newRatio("backup", run["backup"], ratioTarget, objects >= backupTargetFrom, ref, "raw LIST"),
		newRatio("restore", run["restore"], ratioTarget, true, ref, "raw CREATE"),
	}
}

// newRatio compares ferry's run f with the sum of the references named.
func newRatio(op string, f *Run, target float64, applies bool, refs map[string]*Reference, names ...string) Ratio {
	r := Ratio{Operation: op, Target: target, Applies: applies, Reference: strings.Join(names, " + ")}
	var notes []string
	for _, name := range names {
		x := refs[name]
		if x == nil {
			notes = append(notes, name+" did not run")
			continue
		}
		r.RawSeconds += x.Seconds
		if x.Error != "" {
			notes = append(notes, x.Operation+" failed")
		}
	}
	switch {
	case f == nil:
		notes = append(notes, "ferry "+op+" did not run")
	case f.Error != "":
		notes = append(notes, "ferry "+op+" failed")
	}
	if f != nil {
		r.FerrySeconds, r.MaxRSSMiB, r.UnderRSSTarget = f.Seconds, f.MaxRSSMiB, f.UnderTarget
	}
	if len(notes) > 0 || r.FerrySeconds <= 0 {
		r.Note = strings.Join(notes, "; ")
		return r
	}
	r.Ratio = r.RawSeconds / r.FerrySeconds
	r.Met = r.Ratio >= target
	return r
}

func printMarkdown(w io.Writer, res *Result) {
	fmt.Fprintf(w, "%d objects in %d namespaces (%s), %d CPUs, %s, commit %s, %s\n\n",
		res.Seed.Total, res.Seed.Namespaces, fmtCounts(res.Seed.Objects), res.CPUs, res.GoVersion, benchutil.OrDash(res.Commit), res.Time.Format(time.RFC3339))
	if len(res.Ratios) > 0 {
		printRatios(w, res)
	}
	printRuns(w, res)
	if c := res.Estimate; c != nil && c.Error == "" {
		fmt.Fprintf(w, "\nPre-flight estimate (ferry migrate --preflight, %.1f s) against the migrate that followed it:\n\n", c.Seconds)
		fmt.Fprintln(w, "| step | estimated | actual | estimated ÷ actual | within ±50% |")
		fmt.Fprintln(w, "|---|--:|--:|--:|:-:|")
		for _, r := range append(c.Parts, c.Total) {
			fmt.Fprintf(w, "| %s | %.1f s | %.1f s | %.2f | %s |\n", r.Step, r.Estimated, r.Actual, r.Ratio, mark(r.Ratio >= 0.5 && r.Ratio <= 1.5))
		}
	}
	for _, r := range res.Runs {
		if !r.UnderTarget {
			fmt.Fprintf(w, "\n**%s over the RSS target**: peak RSS %.0f MiB, target %.0f MiB\n", r.Operation, r.MaxRSSMiB, res.TargetMiB)
		}
		if r.Error == "" {
			continue
		}
		fmt.Fprintf(w, "\n**%s failed**: %s\n", r.Operation, strings.ReplaceAll(benchutil.Tail(r.Error, 1500), "\n", "; "))
		if p := r.Problems; p != nil {
			for _, k := range sortedKeys(p.FailedByMessage) {
				fmt.Fprintf(w, "- %d × %s\n", p.FailedByMessage[k], k)
			}
		}
	}
	for _, r := range res.References {
		if r.Error != "" {
			fmt.Fprintf(w, "\n**%s failed**: %s\n", r.Operation, strings.ReplaceAll(benchutil.Tail(r.Error, 1500), "\n", "; "))
		}
		for _, d := range r.CountDiffs {
			fmt.Fprintf(w, "\n%s counted differently from ferry's backup: %s\n", r.Operation, d)
		}
	}
	fmt.Fprintf(w, "\nSeed (client-go, %d goroutines): %.0f objects/s; Services: %d ClusterIP, %d headless (service CIDR /24); source etcd database %.0f MiB.\n",
		res.Seed.Workers, res.Seed.PerSecond, res.Seed.ClusterIPServices, res.Seed.HeadlessServices, res.Seed.StorageMiB)
}

// printRatios prints ferry ÷ raw for migrate, backup and restore.
func printRatios(w io.Writer, res *Result) {
	fmt.Fprintf(w, "| ferry | wall time | raw reference | wall time | ferry ÷ raw | target | met | ferry peak RSS | < %.0f MiB |\n", res.TargetMiB)
	fmt.Fprintln(w, "|---|--:|---|--:|--:|---|:-:|--:|:-:|")
	for _, r := range res.Ratios {
		ratio, target, met := "–", "–", "–"
		if r.Note != "" {
			ratio = "(" + r.Note + ")"
		} else {
			ratio = fmt.Sprintf("**%.2f**", r.Ratio)
		}
		if r.Target > 0 {
			target = fmt.Sprintf("≥ %.1f", r.Target)
			if r.Operation == "backup" {
				target += " at ≥ " + commas(backupTargetFrom) + " objects"
			}
			switch {
			case r.Note != "":
			case !r.Applies:
				met = "n/a (" + mark(r.Met) + ")"
			default:
				met = mark(r.Met)
			}
		}
		fmt.Fprintf(w, "| %s | %.1f s | %s | %.1f s | %s | %s | %s | %.0f MiB | %s |\n",
			r.Operation, r.FerrySeconds, r.Reference, r.RawSeconds, ratio, target, met, r.MaxRSSMiB, mark(r.UnderRSSTarget))
	}
	fmt.Fprintf(w, "\nferry ÷ raw = the reference's wall time ÷ ferry's = ferry's objects/s ÷ the reference's, for the same %d seeded objects. "+
		"migrate's time includes its verification of the target (%.1f s), which the references do not do. "+
		"A ratio below its target is reported, not a failure; a peak RSS over the target fails the benchmark. "+
		"ferry ran with %s (no Go soft memory limit), its migrate and backup with --images %s.\n\n", res.Seed.Total, verifySeconds(res.Runs), strings.Join(res.FerryEnv, " "), res.Images)
}

// printRuns prints every timed child: ferry's runs and the references.
func printRuns(w io.Writer, res *Result) {
	fmt.Fprintln(w, "| run | objects | items | wall time | objects/s | peak RSS | CPU | result |")
	fmt.Fprintln(w, "|---|--:|---|--:|--:|--:|--:|---|")
	for _, r := range res.Runs {
		var items []string
		if r.Backup != nil {
			items = append(items, fmt.Sprintf("%d backed up", r.ItemsBackedUp))
		}
		if r.Restore != nil {
			items = append(items, fmt.Sprintf("%d created", r.Created))
		}
		result := "ok"
		switch {
		case r.Error != "":
			result = "FAILED (see stderr / JSON)"
		case r.Restore != nil:
			result = fmt.Sprintf("Completed, %d failed, counts match", r.Restore.Status.Counts.Failed)
			if c := r.Content; c != nil {
				result += fmt.Sprintf(", %d sampled objects' content matches", c.Total)
			}
		case r.Backup != nil:
			result = string(r.Backup.Status.Phase)
		}
		fmt.Fprintf(w, "| ferry %s | %d | %s | %.1f s | %.0f | %.0f MiB | %.1f s | %s |\n",
			r.Operation, r.Objects, benchutil.OrDash(strings.Join(items, ", ")), r.Seconds, r.PerSecond, r.MaxRSSMiB, r.CPUSeconds, result)
	}
	for _, r := range res.References {
		items, result := "-", "ok"
		if x := r.Raw; x != nil && x.Tiers != nil {
			items = fmt.Sprintf("%d created", x.Created)
		} else if x != nil {
			items = fmt.Sprintf("%d listed", x.Items)
		}
		switch {
		case r.Error != "":
			result = "FAILED (see stderr / JSON)"
		case r.Content != nil:
			result = fmt.Sprintf("counts match, %d sampled objects' content matches", r.Content.Total)
		}
		if r.Raw != nil {
			result += "; " + describeRaw(r.Raw)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.1f s | %.0f | %.0f MiB | %.1f s | %s |\n",
			r.Operation, r.Objects, items, r.Seconds, r.PerSecond, r.MaxRSSMiB, r.CPUSeconds, result)
	}
	fmt.Fprintf(w, "\nEach row is one child process, timed from start to exit (wall clock), peak RSS and CPU (user + system) from getrusage, "+
		"read by a small launcher. objects/s = seeded objects ÷ wall time; ferry's item counts include what the cluster adds "+
		"(ReplicaSets, Endpoints, EndpointSlices, ServiceAccounts, system namespaces). migrate: source → target; "+
		"backup and raw LIST: the same source; restore and raw CREATE: each into an empty cluster of its own "+
		"(ferry's restore: %d concurrent API calls per tier; raw CREATE: %d goroutines per tier, the same tiers; "+
		"ferry's backup: %d LIST streams, pages of %d; raw LIST: %d streams, pages of %d).\n",
		ferryRestoreWorkers, refWorkers(res, "raw CREATE"), ferryListWorkers, ferryPageSize, refWorkers(res, "raw LIST"), refPage(res))
}

// verifySeconds is migrate's verification time.
func verifySeconds(runs []*Run) float64 {
	for _, r := range runs {
		if r.Operation == "migrate" {
			return r.FerryVerifySeconds
		}
	}
	return 0
}

// commas writes n with thousands separators.
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func refWorkers(res *Result, op string) int {
	for _, r := range res.References {
		if r.Operation == op && r.Raw != nil {
			return r.Raw.Workers
		}
	}
	return 0
}

func refPage(res *Result) int {
	for _, r := range res.References {
		if r.Raw != nil && r.Raw.PageSize > 0 {
			return r.Raw.PageSize
		}
	}
	return 0
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

func fmtCounts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// progress logs done/total every 10 s until the returned func is called.
func progress(what string, done *atomic.Int64, total int) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				logf("  %s %d of %d", what, done.Load(), total)
			}
		}
	})
	return func() { close(stop); wg.Wait() }
}

func logf(format string, args ...any) { benchutil.Logf("load", format, args...) }
