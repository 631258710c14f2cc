package storagelocation

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/store"
)

// TestCheck runs the one location check, which server mode's and the
// hub's location controllers call, through an available store, a missing
// one and one that refuses connections.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, url, want string
	}{
		{"available", "file://" + dir, ""},
		{"unknown scheme", "ftp://example.invalid/x", "ftp"},
		{"refuses connections", "s3://no-bucket?endpoint=http://127.0.0.1:1&region=us-east-1&use_path_style=true", "s3://no-bucket"},
	} {
		err := Check(context.Background(), 10*time.Second, func(ctx context.Context) (*store.Location, error) { return store.Open(ctx, tc.url) })
		cond := Condition(err, 3)
		switch {
		case tc.want == "" && (err != nil || cond.Status != metav1.ConditionTrue):
			t.Errorf("%s: %v, condition %+v; want Available", tc.name, err, cond)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || cond.Status != metav1.ConditionFalse || cond.Message != err.Error()):
			t.Errorf("%s: %v, condition %+v; want Unavailable naming %q", tc.name, err, cond, tc.want)
		}
		if cond.Type != ConditionAvailable || cond.ObservedGeneration != 3 {
			t.Errorf("%s: condition %+v", tc.name, cond)
		}
	}
	if got := NextCheck(nil, time.Minute); got != time.Minute {
		t.Errorf("NextCheck without a frequency: %s", got)
	}
	if got := NextCheck(&metav1.Duration{Duration: 5 * time.Second}, time.Minute); got != 5*time.Second {
		t.Errorf("NextCheck with a frequency: %s", got)
	}
}
