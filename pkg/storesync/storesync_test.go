package storesync

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestPlanSync runs the plan that server mode's store sync and the hub's
// follow through each case of a backup in the location and a Backup in
// the front end.
func TestPlanSync(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	past, future := metav1.NewTime(now.Add(-time.Hour)), metav1.NewTime(now.Add(time.Hour))
	entry := func(name string, phase v1alpha1.Phase) store.BackupEntry {
		b := v1alpha1.NewBackup(name)
		b.Status.Phase = phase
		return store.BackupEntry{Name: name, Backup: b}
	}
	stored := []store.BackupEntry{
		entry("cli-taken", v1alpha1.PhaseCompleted),
		entry("partial", v1alpha1.PhasePartiallyFailed),
		entry("running", v1alpha1.PhaseIncomplete),
		entry("failed", v1alpha1.PhaseFailed),
		entry("known", v1alpha1.PhaseCompleted),
		entry("half-synced", v1alpha1.PhaseCompleted),
	}
	known := map[string]Known{
		"known":         {Phase: v1alpha1.PhaseCompleted, InLocation: true},
		"half-synced":   {Synced: true, InLocation: true},                                                        // made, status not written yet
		"folder-gone":   {Phase: v1alpha1.PhaseCompleted, InLocation: true, Expiration: &future},                 // deleted out of band
		"expired-gone":  {Phase: v1alpha1.PhaseCompleted, InLocation: true, Expiration: &past},                   // its expiry prunes and deletes it
		"elsewhere":     {Phase: v1alpha1.PhaseCompleted},                                                        // another location's
		"failed-gone":   {Phase: v1alpha1.PhaseFailed, InLocation: true},                                         // never restorable: left alone
		"running-local": {Phase: v1alpha1.PhaseInProgress, InLocation: true},                                     // not written yet
		"synced-gone":   {Phase: v1alpha1.PhasePartiallyFailed, Synced: true, InLocation: true, Expiration: nil}, // synced, then deleted
		"stuck-new":     {Synced: true},                                                                          // status never written, folder gone
	}
	p := PlanSync(stored, known, now)
	var add []string
	for _, b := range p.Add {
		add = append(add, b.Name)
	}
	slices.Sort(add)
	slices.Sort(p.Remove)
	if want := []string{"cli-taken", "half-synced", "partial"}; !slices.Equal(add, want) {
		t.Errorf("add %v, want %v", add, want)
	}
	if want := []string{"folder-gone", "stuck-new", "synced-gone"}; !slices.Equal(p.Remove, want) {
		t.Errorf("remove %v, want %v", p.Remove, want)
	}
}

// TestOwns: a location's record belongs to the Backup that wrote it, or
// to the one store sync made from it; an old record without a UID only to
// the latter.
func TestOwns(t *testing.T) {
	rec := func(uid string) *v1alpha1.Backup { b := v1alpha1.NewBackup("b"); b.UID = types.UID(uid); return b }
	synced := map[string]string{LabelSyncedFrom: "primary"}
	for _, tc := range []struct {
		name         string
		uid          string
		labels, anns map[string]string
		stored       *v1alpha1.Backup
		want         bool
	}{
		{"its own run", "u1", nil, nil, rec("u1"), true},
		{"another backup of the name", "u1", nil, nil, rec("u2"), false},
		{"synced from this record", "hub-uid", synced, Annotations(rec("u2")), rec("u2"), true},
		{"synced from an older record", "hub-uid", synced, Annotations(rec("u2")), rec("u3"), false},
		{"old record, synced", "hub-uid", synced, nil, rec(""), true},
		{"old record, not synced", "u1", nil, nil, rec(""), false},
	} {
		if got := Owns(types.UID(tc.uid), tc.labels, tc.anns, tc.stored); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
