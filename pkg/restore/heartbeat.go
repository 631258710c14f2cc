package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// A running restore's record in the location is InProgress, and its
// status.heartbeatTime is renewed every HeartbeatInterval until the run
// writes its outcome. A run that was killed (SIGKILL, a crash, a lost
// machine) leaves it InProgress with a heartbeat that no longer moves.
var (
	HeartbeatInterval = 5 * time.Second
	// HeartbeatStale is how long a later run of the same restore watches
	// an InProgress record's heartbeat before it takes the earlier run for
	// interrupted. It watches the heartbeat change, so the two machines'
	// clocks need not agree.
	HeartbeatStale = 20 * time.Second
)

// Interrupted says whether r, a restore's record read from the location,
// is of a run that was interrupted and never recorded its outcome: it is
// InProgress and its heartbeat is over a minute older than now (by this
// machine's clock; a display, not a decision: newRecord watches the
// heartbeat instead). Running it again under its name finishes it.
func Interrupted(r *v1alpha1.Restore, now time.Time) bool {
	if r.Status.Phase != v1alpha1.PhaseInProgress {
		return false
	}
	hb := r.Status.HeartbeatTime
	if hb == nil {
		hb = r.Status.StartTimestamp
	}
	return hb == nil || now.Sub(hb.Time) > time.Minute
}

// heartbeat renews a restore's InProgress record until stopped.
type heartbeat struct {
	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// startHeartbeat writes r's record as InProgress, with a heartbeat, and
// renews the heartbeat every HeartbeatInterval (on a copy of the record as
// it is now: the run goes on changing r). The error is the first write's.
func startHeartbeat(ctx context.Context, loc *store.Location, r *v1alpha1.Restore) (*heartbeat, error) {
	rec := r.DeepCopy()
	rec.Status.Phase = v1alpha1.PhaseInProgress
	if rec.Annotations == nil {
		rec.Annotations = map[string]string{}
	}
	rec.Annotations[AnnotationHolder] = holderID(os.Getpid())
	key := store.RestoreDir(r.Name) + store.RestoreMarker
	now := metav1.Now()
	rec.Status.HeartbeatTime = &now
	if err := loc.PutJSON(ctx, key, rec); err != nil {
		return nil, fmt.Errorf("restore %s: writing its record: %w", r.Name, err)
	}
	h := &heartbeat{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				now := metav1.Now()
				rec.Status.HeartbeatTime = &now
				_ = loc.PutJSON(ctx, key, rec) // the next beat tries again
			}
		}
	}()
	return h, nil
}

// Stop ends the renewals and waits for a write in flight, so that the
// run's outcome, written next, is the last word.
func (h *heartbeat) Stop() {
	if h == nil {
		return
	}
	h.once.Do(func() { close(h.stop) })
	<-h.done
}

// awaitEarlierRun watches the InProgress record prev of an earlier run of
// restore name for up to HeartbeatStale (not at all when its process ran
// on this machine and has exited, holderGone): if its heartbeat moves, that run
// is alive and the error says so; if its record changes to an outcome,
// that record is returned; otherwise that run was interrupted, and prev is
// returned for this run to finish.
func awaitEarlierRun(ctx context.Context, loc *store.Location, name string, prev *v1alpha1.Restore) (*v1alpha1.Restore, error) {
	beat := func(r *v1alpha1.Restore) time.Time {
		if r.Status.HeartbeatTime == nil {
			return time.Time{}
		}
		return r.Status.HeartbeatTime.Time
	}
	if holderGone(prev) {
		return prev, nil // its process, on this machine, has exited
	}
	first := beat(prev)
	deadline := time.Now().Add(HeartbeatStale)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		cur, err := loc.GetRestore(ctx, name)
		if err != nil {
			return nil, err
		}
		if cur.Status.Phase != v1alpha1.PhaseInProgress {
			return cur, nil
		}
		if !beat(cur).Equal(first) {
			return nil, fmt.Errorf("restore %q is running elsewhere (its record's heartbeat moved to %s): wait for it to end", name, beat(cur).Format(time.RFC3339))
		}
	}
	return prev, nil
}

// AnnotationHolder, on a restore's InProgress record, names the process
// running it: host name, PID namespace and PID (holderID).
const AnnotationHolder = "ferry.dev/holder"

// holderID names process pid of this machine and PID namespace.
func holderID(pid int) string {
	host, _ := os.Hostname()
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return host + "/" + ns + "/" + strconv.Itoa(pid)
}

// holderGone says whether the process that holds record r is known to
// have exited: it ran on this machine, in this PID namespace, and no
// process has its PID. Anything else (another machine, a PID in use,
// perhaps by another program) is not known, and the heartbeat decides.
func holderGone(r *v1alpha1.Restore) bool {
	h := r.Annotations[AnnotationHolder]
	i := strings.LastIndex(h, "/")
	if i < 0 {
		return false
	}
	pid, err := strconv.Atoi(h[i+1:])
	if err != nil || pid <= 0 || holderID(pid) != h {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
