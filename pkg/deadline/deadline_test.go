package deadline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDeadline: a step cut short by its deadline says which field set it
// and how long it had, over the context's own error or wrapped around
// another; an error the deadline did not cause stays as it is.
func TestDeadline(t *testing.T) {
	d := Deadline{After: time.Nanosecond, Field: "spec.timeouts.backup"}
	ctx, cancel := d.Context(context.Background(), "backup")
	defer cancel()
	<-ctx.Done()
	want := "spec.timeouts.backup: the backup did not end within 1ns"
	var exceeded *ExceededError
	if err := Cause(ctx, ctx.Err()); !errors.As(err, &exceeded) || err.Error() != want {
		t.Errorf("Cause of the context's error: %v, want %q", err, want)
	}
	if err := Cause(ctx, fmt.Errorf("listing pods: %w", context.DeadlineExceeded)); err.Error() != want {
		t.Errorf("Cause of an error over the context's: %v, want %q", err, want)
	}
	other := errors.New("the store refused the write")
	if err := Cause(ctx, other); !errors.Is(err, other) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Cause of another error: %v, want it wrapped after %q", err, want)
	}
	if err := Cause(ctx, nil); err != nil {
		t.Errorf("Cause of no error once the deadline passed: %v, want none (the step ended)", err)
	}
	if err := Cause(context.Background(), other); err != other {
		t.Errorf("Cause without a deadline: %v, want the error as it is", err)
	}

	none, cancel2 := Deadline{}.Context(context.Background(), "restore")
	defer cancel2()
	if _, ok := none.Deadline(); ok {
		t.Error("a zero Deadline set a deadline")
	}
	if err := (Deadline{After: -time.Second, Field: "--restore-timeout"}).Validate(); err == nil || err.Error() != "--restore-timeout -1s is negative (0: no deadline)" {
		t.Errorf("a negative deadline: %v, want refused naming --restore-timeout", err)
	}
}
