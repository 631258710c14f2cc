package migration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// ErrDone is returned (wrapped) by Prepare for a migration whose restore
// has recorded its outcome already: there is nothing to resume.
var ErrDone = errors.New("the migration has run already")

// Prepare decides how migration name starts in loc, with backup spec
// spec: afresh (nil, nil), or resumed (the committed backup to reuse).
// A migration run again under its name after it was interrupted (killed,
// or Ctrl-C) in its restore, or whose restore PartiallyFailed (a claim's
// helper could not run, say) and whose cause was fixed, resumes: its
// committed backup is reused, and its restore is finished by a new run of it
// (restore.Run takes the earlier run's UID, and claims that hold the
// backup's data keep it). Refused, with the reason:
//   - a committed backup of that name with no restore record: no run of
//     this migration got to its restore, so the backup may be another's
//     or an old one, and restoring it unasked could move stale data;
//   - a migration whose restore Completed (ErrDone);
//   - a backup that is Incomplete (interrupted before its commit: it holds
//     no restorable data, and may still be written by a live run) or
//     Failed;
//   - a backup taken with another spec (say other namespaces): resuming
//     would restore what was not asked for.
func Prepare(ctx context.Context, loc *store.Location, name string, spec v1alpha1.BackupSpec) (*v1alpha1.Backup, error) {
	r, err := loc.GetRestore(ctx, name)
	switch {
	case err == nil && r.Status.Phase == v1alpha1.PhaseCompleted:
		return nil, fmt.Errorf("migration %s: %w: its restore is %s in %s; choose another name", name, ErrDone, r.Status.Phase, loc.URL())
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	restoreRan := err == nil
	b, err := loc.GetBackup(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case errors.Is(err, store.ErrIncomplete):
		return nil, fmt.Errorf("migration %s: backup %s is Incomplete in %s: a run was interrupted during its backup, which cannot be resumed (or a run is still backing up: then wait for it); once no run writes it, remove it with `ferry backup delete %s --storage %s` and run the migration again", name, name, loc.URL(), name, loc.URL())
	case err != nil:
		return nil, err
	case b.Status.Phase == v1alpha1.PhaseFailed:
		return nil, fmt.Errorf("migration %s: backup %s Failed (%s): nothing to restore; remove it with `ferry backup delete %s --storage %s`, or choose another name", name, name, orUnknown(b.Status.FailureReason), name, loc.URL())
	}
	if !restoreRan {
		// No run of this migration got to its restore: the backup is
		// another's (ferry backup create), or an old one whose restore was
		// deleted. Restoring it unasked could move stale data.
		return nil, fmt.Errorf("migration %s: backup %s is already in %s (%s, completed %s), and no restore of that name ran, so this is no interrupted migration to resume: choose another name, or restore that backup with `ferry restore create %s --from-backup %s`", name, name, loc.URL(), b.Status.Phase, completed(b), name, name)
	}
	if diff := specDiff(b.Spec, spec, loc.URL()); diff != "" {
		return nil, fmt.Errorf("migration %s: backup %s in %s was taken with another spec (%s differs), so it is not resumed: choose another name", name, name, loc.URL(), diff)
	}
	return b, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason recorded"
	}
	return s
}

// completed is when b completed, for messages.
func completed(b *v1alpha1.Backup) string {
	if t := b.Status.CompletionTimestamp; t != nil {
		return t.UTC().Format(time.RFC3339)
	}
	return "at an unknown time"
}

// specDiff names the fields in which the stored backup's spec differs
// from the one asked for ("" when none does), the location aside.
func specDiff(stored, want v1alpha1.BackupSpec, url string) string {
	stored.StorageLocation, want.StorageLocation = url, url
	if reflect.DeepEqual(stored, want) {
		return ""
	}
	var a, b map[string]any
	sa, _ := json.Marshal(stored)
	sb, _ := json.Marshal(want)
	_ = json.Unmarshal(sa, &a)
	_ = json.Unmarshal(sb, &b)
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !reflect.DeepEqual(a[k], b[k]) {
			diff = append(diff, "spec."+k)
		}
	}
	if len(diff) == 0 {
		return "the spec"
	}
	return strings.Join(diff, ", ")
}
