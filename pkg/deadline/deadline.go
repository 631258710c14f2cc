// Package deadline is a step's deadline: how long a backup, a restore or a
// verification may take, and the context that ends at it with a cause
// that names the spec field (or flag) that set it, so that a step cut
// short says why and by what, not "context deadline exceeded".
package deadline

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Deadline bounds one step.
type Deadline struct {
	// After is how long the step may take; 0 is no deadline.
	After time.Duration
	// Field names what set After, for the error: a spec field such as
	// spec.timeouts.backup, or a flag.
	Field string
}

// ExceededError is the cause of a context that ended at its Deadline.
type ExceededError struct {
	Step     string
	Deadline Deadline
}

func (e *ExceededError) Error() string {
	return fmt.Sprintf("%s: the %s did not end within %s", e.Deadline.field(), e.Step, e.Deadline.After)
}

// field is Field, or "timeout" when none is named.
func (d Deadline) field() string {
	if d.Field == "" {
		return "timeout"
	}
	return d.Field
}

// Context is ctx ending at d (if set), its cause an ExceededError of step.
func (d Deadline) Context(ctx context.Context, step string) (context.Context, context.CancelFunc) {
	if d.After <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d.After, &ExceededError{Step: step, Deadline: d})
}

// Cause is err, or the ExceededError ctx ended with, which says more than
// the "context deadline exceeded" err may be; nil stays nil (a step that
// ended as its deadline passed ended).
func Cause(ctx context.Context, err error) error {
	var exceeded *ExceededError
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); errors.As(cause, &exceeded) && !errors.As(err, &exceeded) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return exceeded
		}
		return fmt.Errorf("%w (%w)", exceeded, err)
	}
	return err
}

// Validate checks d: not negative.
func (d Deadline) Validate() error {
	if d.After < 0 {
		return fmt.Errorf("%s %s is negative (0: no deadline)", d.field(), d.After)
	}
	return nil
}

// The front ends' default deadlines (their flags': ferry migrate's, the
// hub's, the server's).
const (
	DefaultBackup  = 24 * time.Hour
	DefaultRestore = 24 * time.Hour
	DefaultVerify  = time.Hour
)
