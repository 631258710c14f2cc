package servermode

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// A panic in a run ends its object through fail, with the panic in the
// message, and the reconciler returns fail's error.
func TestFailOnPanic(t *testing.T) {
	var got string
	run := func() (err error) {
		defer failOnPanic(slog.New(slog.NewTextHandler(io.Discard, nil)), "restore", "r1", func(msg string) error {
			got = msg
			return errors.New("patched")
		}, &err)
		panic(errors.New("boom"))
	}
	err := run()
	if err == nil || err.Error() != "patched" || !strings.Contains(got, "internal error in ferry") || !strings.Contains(got, "boom") {
		t.Fatalf("err %v, message %q", err, got)
	}
	// No panic: fail is not called.
	got = ""
	ok := func() (err error) {
		defer failOnPanic(slog.New(slog.NewTextHandler(io.Discard, nil)), "restore", "r1", func(msg string) error { got = msg; return nil }, &err)
		return nil
	}
	if err := ok(); err != nil || got != "" {
		t.Fatalf("err %v, message %q", err, got)
	}
}
