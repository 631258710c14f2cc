package servermode

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// EventReasons of the events.k8s.io/v1 Events the server records on
// Backups, Restores and BackupStorageLocations (kubectl describe and
// kubectl events show them). A nil recorder records nothing.
const (
	EventStarted     = "Started"
	EventUnavailable = "Unavailable"
	EventAvailable   = "Available"
)

// event records one Event on o; rec may be nil.
func event(rec events.EventRecorder, o runtime.Object, warning bool, reason, action, note string, args ...any) {
	if rec == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	// Event notes are at most 1 kB.
	msg := fmt.Sprintf(note, args...)
	if len(msg) > 1000 {
		msg = msg[:997] + "..."
	}
	rec.Eventf(o, nil, typ, reason, action, "%s", msg)
}

// endEvent records how a Backup or Restore ended: reason is its phase,
// Warning unless Completed.
func endEvent(rec events.EventRecorder, o runtime.Object, action string, phase v1alpha1.Phase, warnings, errs int, failure string) {
	note := fmt.Sprintf("%s, %d warnings, %d errors", phase, warnings, errs)
	if failure != "" {
		note += ": " + failure
	}
	event(rec, o, phase != v1alpha1.PhaseCompleted, string(phase), action, "%s", note)
}
