// Package events owns the Events ferry's controllers record on the
// objects they run (server mode's in its cluster, through events.k8s.io;
// the hub's in the hub, through core/v1): their reasons, their notes and
// the rule for how a run's end is told. kubectl describe and kubectl
// events show them. A nil recorder records nothing.
package events

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kevents "k8s.io/client-go/tools/events"
)

// Reasons of the Events beside a run's end, whose reason is its phase.
const (
	Started     = "Started"
	Unavailable = "Unavailable"
	Available   = "Available"
	Verified    = "Verified"
)

// maxNote is an Event note's limit (1 kB).
const maxNote = 1000

// Record records one Event on o, a Warning when warning is set; rec may
// be nil.
func Record(rec kevents.EventRecorder, o runtime.Object, warning bool, reason, action, note string, args ...any) {
	if rec == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	msg := fmt.Sprintf(note, args...)
	if len(msg) > maxNote {
		msg = strings.ToValidUTF8(msg[:maxNote-3], "") + "..."
	}
	rec.Eventf(o, nil, typ, reason, action, "%s", msg)
}

// End records how a run (a Backup, a Restore, a Migration) ended: the
// reason is its phase, and the Event a Warning unless it Completed.
func End(rec kevents.EventRecorder, o runtime.Object, action, phase string, warnings, errs int, failure string) {
	note := fmt.Sprintf("%s, %d warnings, %d errors", phase, warnings, errs)
	if failure != "" {
		note += ": " + failure
	}
	Record(rec, o, phase != "Completed", phase, action, "%s", note)
}
