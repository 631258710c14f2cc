package controller

import (
	"strings"
	"testing"
)

// A Schedule that would run more often than once a minute is refused:
// robfig/cron takes "@every 0s", "@every -1h" and "@every 1ms" as every
// second (found by a new-user run; they were accepted and would have
// started a Backup each second).
func TestParseSchedule(t *testing.T) {
	for _, expr := range []string{"@every 0s", "@every -1h", "@every 1ms", "@every 30s"} {
		if _, err := ParseSchedule(expr); err == nil || !strings.Contains(err.Error(), "at least 1m0s apart") {
			t.Errorf("%q: %v", expr, err)
		}
	}
	for _, expr := range []string{"* * * * *", "@every 1m", "@hourly", "0 3 * * *"} {
		if _, err := ParseSchedule(expr); err != nil {
			t.Errorf("%q: %v", expr, err)
		}
	}
	if _, err := ParseSchedule("every tuesday"); err == nil || !strings.Contains(err.Error(), "want a five-field cron expression") {
		t.Errorf("bad expression: %v", err)
	}
}
