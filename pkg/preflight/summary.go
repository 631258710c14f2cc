package preflight

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/report"
)

// Bounds of what a status keeps of a report.
const (
	MaxStatusRisks   = 50
	MaxStatusObjects = 10
)

// Summary is the status.preflight of report p that server mode's Restore
// and the hub's Migration hold: the counts, the first MaxStatusRisks
// risks with their first MaxStatusObjects objects each (ObjectCount all
// of them), and the estimate.
func Summary(p *report.Preflight) *v1alpha1.PreflightSummary {
	st := &v1alpha1.PreflightSummary{Objects: int64(p.Objects), Blockers: int32(p.Counts[report.Blocker]),
		Warnings: int32(p.Counts[report.Warning]), Notes: int32(p.Counts[report.Note]), Skipped: p.Skipped}
	for i, r := range p.Risks {
		if i == MaxStatusRisks {
			break
		}
		objs := r.Objects
		if len(objs) > MaxStatusObjects {
			objs = objs[:MaxStatusObjects]
		}
		st.Risks = append(st.Risks, v1alpha1.PreflightRisk{Severity: string(r.Severity), Check: r.Check, Objects: objs,
			ObjectCount: int32(len(r.Objects)), What: r.What, Fix: r.Fix})
	}
	if e := p.Estimate; e != nil {
		st.Estimate = &metav1.Duration{Duration: seconds(e.Seconds)}
		for _, pt := range e.Parts {
			st.EstimateParts = append(st.EstimateParts, v1alpha1.PreflightEstimatePart{Step: pt.Step, Duration: metav1.Duration{Duration: seconds(pt.Seconds)}, Basis: pt.Basis})
		}
	}
	return st
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
