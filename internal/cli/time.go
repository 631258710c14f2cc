package cli

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// duration formats end-start, or "-" when either is missing.
func duration(start, end *metav1.Time) string {
	if start == nil || end == nil {
		return "-"
	}
	return end.Sub(start.Time).Round(time.Millisecond).String()
}

func tsString(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
