package schedule

import (
	"strings"
	"testing"
	"time"
)

// A Schedule that would run more often than once a minute is refused:
// robfig/cron takes "@every 0s", "@every -1h" and "@every 1ms" as every
// second (found by a new-user run; they were accepted and would have
// started a Backup each second).
func TestParse(t *testing.T) {
	for _, expr := range []string{"@every 0s", "@every -1h", "@every 1ms", "@every 30s"} {
		if _, err := Parse(expr); err == nil || !strings.Contains(err.Error(), "at least 1m0s apart") {
			t.Errorf("%q: %v", expr, err)
		}
	}
	for _, expr := range []string{"* * * * *", "@every 1m", "@hourly", "0 3 * * *"} {
		if _, err := Parse(expr); err != nil {
			t.Errorf("%q: %v", expr, err)
		}
	}
	if _, err := Parse("every tuesday"); err == nil || !strings.Contains(err.Error(), "want a five-field cron expression") {
		t.Errorf("bad expression: %v", err)
	}
}

// TestDue runs the due-time of a Schedule every hour through the cases
// server mode's and the hub's controllers meet.
func TestDue(t *testing.T) {
	hourly, err := Parse("@hourly")
	if err != nil {
		t.Fatal(err)
	}
	at := func(h, m int) time.Time { return time.Date(2026, 12, 3, h, m, 0, 0, time.UTC) }
	ptr := func(t time.Time) *time.Time { return &t }
	for _, tc := range []struct {
		name      string
		last      *time.Time
		wasPaused bool
		now       time.Time
		due       *time.Time
		next      time.Time
	}{
		{"nothing due yet", nil, false, at(10, 30), nil, at(11, 0)},
		{"first run due", nil, false, at(11, 0), ptr(at(11, 0)), at(12, 0)},
		{"after the last run", ptr(at(11, 0)), false, at(11, 59), nil, at(12, 0)},
		{"runs missed while down collapse into the latest", ptr(at(11, 0)), false, at(14, 30), ptr(at(14, 0)), at(15, 0)},
		{"runs missed while paused are not made up", ptr(at(11, 0)), true, at(14, 30), nil, at(15, 0)},
	} {
		due, next := Due(hourly, at(10, 10), tc.last, tc.wasPaused, tc.now)
		if (due == nil) != (tc.due == nil) || due != nil && !due.Equal(*tc.due) || !next.Equal(tc.next) {
			t.Errorf("%s: due %v, next %v; want %v, %v", tc.name, due, next, tc.due, tc.next)
		}
	}
	if got := BackupName("nightly", at(14, 0)); got != "nightly-20261203140000" {
		t.Errorf("BackupName: %s", got)
	}
	if err := ValidateName(strings.Repeat("a", MaxNameLength)); err != nil {
		t.Errorf("longest name: %v", err)
	}
	if err := ValidateName(strings.Repeat("a", MaxNameLength+1)); err == nil {
		t.Errorf("a name one too long was accepted")
	}
}
