package events

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	kevents "k8s.io/client-go/tools/events"
)

// TestEnd: a run's end is a Normal Event only when it Completed, with its
// phase as the reason and the failure in the note; a long note is cut to
// the 1 kB limit at a character boundary; a nil recorder records nothing.
func TestEnd(t *testing.T) {
	rec := kevents.NewFakeRecorder(4)
	End(rec, &corev1.Pod{}, "Backup", "Completed", 1, 0, "")
	End(rec, &corev1.Pod{}, "Backup", "PartiallyFailed", 0, 2, "volume app/db: gone")
	Record(rec, &corev1.Pod{}, true, Unavailable, "Validate", "%s", strings.Repeat("é", 600))
	want := []string{"Normal Completed Completed, 1 warnings, 0 errors", "Warning PartiallyFailed PartiallyFailed, 0 warnings, 2 errors: volume app/db: gone"}
	for _, w := range want {
		if got := <-rec.Events; got != w {
			t.Errorf("Event %q, want %q", got, w)
		}
	}
	long := <-rec.Events
	note := strings.TrimPrefix(long, "Warning Unavailable ")
	if len(note) > maxNote || !utf8.ValidString(note) || !strings.HasSuffix(note, "...") {
		t.Errorf("a long note: %d bytes, valid UTF-8 %v, ends %q", len(note), utf8.ValidString(note), note[len(note)-5:])
	}
	Record(nil, &corev1.Pod{}, false, Started, "Backup", "nothing")
}
