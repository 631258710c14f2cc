package report

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Kinds of rows in a report's running section.
const (
	KindWorkload = "workload"
	KindService  = "service"
	KindClaim    = "claim"
	KindImage    = "image"
)

// Running is a verification's running section: whether the applications
// the restore wrote run in the target. One Check per restored workload,
// Service that selects pods, claim and image; failures first.
type Running struct {
	// Skipped says why the runtime checks did not run (a move of
	// resources only); the counts are then zero.
	Skipped string `json:"skipped,omitempty"`
	// ImagesCheckedFrom says where the images were resolved: from where
	// ferry runs, not from the target's nodes.
	ImagesCheckedFrom string `json:"imagesCheckedFrom,omitempty"`
	// DataCheckedBy says how the claims' data was checked, when it was
	// not by a helper pod walking each claim in the target.
	DataCheckedBy string `json:"dataCheckedBy,omitempty"`
	// Waited is how long the check waited for the workloads, in seconds.
	Waited float64 `json:"waitedSeconds"`
	// Ready is when every workload, Service and claim was seen healthy
	// (zero when one never was): a staged migration's downtime ends there.
	Ready  time.Time     `json:"ready,omitzero"`
	Counts RunningCounts `json:"counts"`
	Checks []Check       `json:"checks"`
}

// RunningCounts counts a running section's rows by kind; Failed counts
// the rows that are not OK, of every kind.
type RunningCounts struct {
	Workloads        int `json:"workloads"`
	WorkloadsRunning int `json:"workloadsRunning"`
	Services         int `json:"services"`
	ServicesServing  int `json:"servicesServing"`
	Claims           int `json:"claims"`
	ClaimsOK         int `json:"claimsOK"`
	ClaimsBound      int `json:"claimsBound"`
	// ClaimsWithData counts the claims whose data the restore wrote (or
	// failed to), ClaimsEqual those equal to what it wrote,
	// ClaimsChangedByApp those an application changed since, and
	// ClaimsNotChecked those whose data could not be walked.
	ClaimsWithData     int `json:"claimsWithData"`
	ClaimsEqual        int `json:"claimsEqual"`
	ClaimsChangedByApp int `json:"claimsChangedByApp"`
	ClaimsNotChecked   int `json:"claimsNotChecked"`
	Images             int `json:"images"`
	ImagesPresent      int `json:"imagesPresent"`
	Failed             int `json:"failed"`
}

// Check is one row of the running section: a workload (Kind "workload",
// Resource its kind), a Service, a claim or an image, whether it is as it
// should be (OK), the outcome in words ("running", "not running",
// "bound", "present", "missing"), and, when it is not OK, why: Reason is
// the cluster's own word (ImagePullBackOff, FailedScheduling,
// CreateContainerConfigError, CrashLoopBackOff, FailedMount) and Message
// its text, naming the image, the node selector or the Secret.
type Check struct {
	Kind      string `json:"kind"`
	Resource  string `json:"resource,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	OK        bool   `json:"ok"`
	Outcome   string `json:"outcome"`
	Detail    string `json:"detail,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
	// Logs are the last lines of a failing container's log.
	Logs string `json:"logs,omitempty"`
	// Data is, for a claim whose data the restore wrote, how its content
	// compares with what the restore wrote (DataEqual, ...), and
	// DataDetail its files, bytes and digest, and the snapshot's.
	Data       string `json:"data,omitempty"`
	DataDetail string `json:"dataDetail,omitempty"`
	// Bound is set for a claim that is bound (or waits for its first
	// consumer), whatever its data check says.
	Bound bool `json:"bound,omitempty"`
}

// Outcomes of a claim's data check (Check.Data).
const (
	DataEqual        = "equal"
	DataChangedByApp = "restored equal, then changed by the application"
	DataUnequal      = "unequal"
	DataNotRestored  = "not restored"
	DataNotChecked   = "not checked"
	// DataKept: the claim's existing data was kept (existingVolumeDataPolicy keep).
	DataKept = "kept"
)

// NewRunning sorts checks (failures first, then by kind and name) and
// counts them.
func NewRunning(checks []Check) *Running {
	r := &Running{Checks: checks}
	kindOrder := map[string]int{KindWorkload: 0, KindService: 1, KindClaim: 2, KindImage: 3}
	sort.SliceStable(r.Checks, func(i, j int) bool {
		a, b := r.Checks[i], r.Checks[j]
		if a.OK != b.OK {
			return !a.OK
		}
		if kindOrder[a.Kind] != kindOrder[b.Kind] {
			return kindOrder[a.Kind] < kindOrder[b.Kind]
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Resource+"/"+a.Name < b.Resource+"/"+b.Name
	})
	c := &r.Counts
	for _, ch := range r.Checks {
		ok := 0
		if ch.OK {
			ok = 1
		} else {
			c.Failed++
		}
		switch ch.Kind {
		case KindWorkload:
			c.Workloads++
			c.WorkloadsRunning += ok
		case KindService:
			c.Services++
			c.ServicesServing += ok
		case KindClaim:
			c.Claims++
			c.ClaimsOK += ok
			if ch.Bound {
				c.ClaimsBound++
			}
			if ch.Data != "" && ch.Data != DataKept {
				c.ClaimsWithData++
			}
			switch ch.Data {
			case DataEqual:
				c.ClaimsEqual++
			case DataChangedByApp:
				c.ClaimsChangedByApp++
			case DataNotChecked:
				c.ClaimsNotChecked++
			}
		case KindImage:
			c.Images++
			c.ImagesPresent += ok
		}
	}
	return r
}

// Headline is the running section's top line: "N of M workloads running,
// ..., K of L claims bound, R of S restored claims equal to what the
// restore wrote, I of J images present", or why it was skipped.
func (r *Running) Headline() string {
	if r == nil {
		return ""
	}
	if r.Skipped != "" {
		return "runtime checks skipped: " + r.Skipped
	}
	c := r.Counts
	parts := []string{fmt.Sprintf("%d of %d workloads running", c.WorkloadsRunning, c.Workloads)}
	if c.Services > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d services with a ready endpoint", c.ServicesServing, c.Services))
	}
	if c.Claims > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d claims bound", c.ClaimsBound, c.Claims))
	}
	if c.ClaimsWithData > 0 {
		data := fmt.Sprintf("%d of %d restored claims equal to what the restore wrote", c.ClaimsEqual+c.ClaimsChangedByApp, c.ClaimsWithData)
		var notes []string
		if c.ClaimsChangedByApp > 0 {
			notes = append(notes, fmt.Sprintf("%d since changed by its application", c.ClaimsChangedByApp))
		}
		if c.ClaimsNotChecked > 0 {
			notes = append(notes, fmt.Sprintf("%d not checked", c.ClaimsNotChecked))
		}
		if len(notes) > 0 {
			data += " (" + strings.Join(notes, ", ") + ")"
		}
		parts = append(parts, data)
	}
	if c.Images > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d images present", c.ImagesPresent, c.Images))
	}
	return strings.Join(parts, ", ")
}

// Failures are the checks that are not OK.
func (r *Running) Failures() []Check {
	if r == nil {
		return nil
	}
	var out []Check
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}
