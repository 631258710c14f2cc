package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubeferry/ferry/bench/internal/benchutil"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/report"
)

// ---------------------------------------------------------------- ferry runs

// ferryRun runs one timed ferry command (args, then the kubeconfig, the
// storage location and -o json) through the launcher, with ferryEnv added
// to its environment, and decodes what it printed: {"backup","restore"}
// for migrate, a Backup or a Restore otherwise. With -cpuprofile, ferry
// writes a CPU profile of the run, <op>.pprof, and runs with -v, its log
// kept as <op>.log.
func (e *ferryRuns) ferryRun(ctx context.Context, op string, objects int, args ...string) *Run {
	args = append(args, "--kubeconfig", e.kubeconfig, "--storage", e.storage, "-o", "json")
	profile := ""
	if e.o.cpuProfile != "" {
		profile = filepath.Join(e.o.cpuProfile, op+".pprof")
		args = append(args, "--cpuprofile", profile, "-v")
	}
	out, stderr, u, err := launch(ctx, e.launcher, ferryEnv, e.ferry, args...)
	if profile != "" {
		// The -v log's timestamps say when each step and tier began.
		if werr := os.WriteFile(filepath.Join(e.o.cpuProfile, op+".log"), stderr, 0o644); werr != nil && err == nil {
			err = werr
		}
	}
	r := &Run{
		Operation: op, Args: args, Objects: objects, Seconds: u.Seconds, MaxRSSMiB: u.MaxRSSMiB, CPUSeconds: u.CPUSeconds,
		UnderTarget: u.MaxRSSMiB < e.o.rssTargetMiB, ExitCode: u.Code, Profile: profile, StderrTail: benchutil.Tail(string(stderr), 4000),
	}
	if r.Seconds > 0 {
		r.PerSecond = float64(objects) / r.Seconds
	}
	var jerr error
	switch op {
	case "migrate":
		var m struct {
			Backup       *v1alpha1.Backup  `json:"backup"`
			Restore      *v1alpha1.Restore `json:"restore"`
			Verification *struct {
				Summary report.Summary  `json:"summary"`
				Timings []report.Timing `json:"timings"`
			} `json:"verification"`
		}
		jerr = json.Unmarshal(out, &m)
		r.Backup, r.Restore = m.Backup, m.Restore
		if v := m.Verification; v != nil {
			r.Verification = &v.Summary
			for _, t := range v.Timings {
				if t.Phase == "verify" {
					r.FerryVerifySeconds = t.Seconds
				}
			}
		}
	case "backup":
		r.Backup = &v1alpha1.Backup{}
		jerr = json.Unmarshal(out, r.Backup)
	case "restore":
		r.Restore = &v1alpha1.Restore{}
		jerr = json.Unmarshal(out, r.Restore)
	}
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("ferry %s: %w", strings.Join(args[:min(3, len(args))], " "), err))
	}
	if jerr != nil {
		errs = append(errs, fmt.Errorf("decoding ferry's output: %w; stdout: %s", jerr, benchutil.Tail(string(out), 500)))
		r.Backup, r.Restore = nil, nil
	}
	if b := r.Backup; b != nil {
		r.ItemsBackedUp = b.Status.Progress.ItemsBackedUp
		r.FerryBackupSeconds = seconds(b.Status.StartTimestamp, b.Status.CompletionTimestamp)
		if b.Status.Phase != "Completed" {
			errs = append(errs, fmt.Errorf("backup phase %s (failureReason %q, %d errors, %d warnings)",
				b.Status.Phase, b.Status.FailureReason, b.Status.Errors, b.Status.Warnings))
		}
	}
	if rs := r.Restore; rs != nil {
		r.Created = rs.Status.Counts.Created
		r.FerryRestoreSeconds = seconds(rs.Status.StartTimestamp, rs.Status.CompletionTimestamp)
		if rs.Status.Phase != "Completed" || rs.Status.Counts.Failed != 0 {
			errs = append(errs, fmt.Errorf("restore phase %s (failureReason %q, counts %+v, %d errors, %d warnings)",
				rs.Status.Phase, rs.Status.FailureReason, rs.Status.Counts, rs.Status.Errors, rs.Status.Warnings))
		}
	} else if op != "backup" && jerr == nil {
		errs = append(errs, errors.New("ferry printed no restore"))
	}
	if op == "migrate" && jerr == nil {
		if v := r.Verification; v == nil {
			errs = append(errs, errors.New("migrate printed no verification"))
		} else if v.Unexpected != 0 {
			errs = append(errs, fmt.Errorf("migrate's verification: %d unexpected differences (%+v)", v.Unexpected, *v))
		}
	}
	if len(errs) > 0 {
		r.Error = errors.Join(errs...).Error()
		if len(stderr) > 0 {
			r.Error += "; stderr: " + benchutil.Tail(string(stderr), 2000)
		}
	}
	return r
}
