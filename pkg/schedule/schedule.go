// Package schedule owns a Schedule's timing: its cron expression, when
// its next Backup is due, and that Backup's name. Server mode's Schedule
// controller, the hub's and `ferry schedule create` all use it
// (docs/design.md#one-engine-three-front-ends).
package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/kubeferry/ferry/pkg/store"
)

// TimeFormat is the timestamp in the names of scheduled Backups:
// <schedule>-<YYYYMMDDhhmmss>, UTC, the time the run was due.
const TimeFormat = "20060102150405"

// MinInterval is the shortest time between two runs of a Schedule: a
// cron expression's own unit. robfig/cron takes "@every 0s" or
// "@every 1ms" as every second, which would start a Backup each second.
const MinInterval = time.Minute

// Parse parses a Schedule's expression (robfig/cron ParseStandard: five
// fields, or @hourly, @every 1h) and refuses one that runs more often than
// MinInterval. Errors say what is wanted.
func Parse(expr string) (cron.Schedule, error) {
	sched, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("%v (want a five-field cron expression such as \"0 */6 * * *\", or @hourly, @every 1h)", err)
	}
	first := sched.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	if gap := sched.Next(first).Sub(first); gap < MinInterval {
		return nil, fmt.Errorf("it runs every %s; runs must be at least %s apart", gap, MinInterval)
	}
	return sched, nil
}

// BackupName is the name of the Backup that Schedule name makes for the
// run due at due.
func BackupName(name string, due time.Time) string {
	return name + "-" + due.UTC().Format(TimeFormat)
}

// MaxNameLength is the longest name a Schedule may have: its Backups'
// names (BackupName) must fit store.MaxBackupNameLength.
const MaxNameLength = store.MaxBackupNameLength - 1 - len(TimeFormat)

// ValidateName refuses a Schedule name too long for its Backups' names.
func ValidateName(name string) error {
	if len(name) > MaxNameLength {
		return fmt.Errorf("schedule name %q is too long: its backups' names would have %d characters, more than %d", name, len(name)+1+len(TimeFormat), store.MaxBackupNameLength)
	}
	return nil
}

// Due says when a schedule's run is due at now, if one is, and when the
// next one is due after it: the runs after the last one (or after
// created) that are due by now collapse into one, the latest. A schedule
// that was paused makes up no run missed while paused.
func Due(sched cron.Schedule, created time.Time, last *time.Time, wasPaused bool, now time.Time) (due *time.Time, next time.Time) {
	from := created
	if last != nil {
		from = *last
	}
	if wasPaused && from.Before(now) {
		from = now
	}
	next = sched.Next(from.UTC())
	if next.After(now) {
		return nil, next
	}
	d := next
	for n := sched.Next(d); !n.After(now); n = sched.Next(n) {
		d = n
	}
	return &d, sched.Next(d)
}
