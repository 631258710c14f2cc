package kube

import (
	"errors"
	"fmt"
	"testing"

	utilexec "k8s.io/client-go/util/exec"
)

func TestExitCode(t *testing.T) {
	exit3 := utilexec.CodeExitError{Err: errors.New("command terminated with exit code 3"), Code: 3}
	if code, ok := ExitCode(fmt.Errorf("wrapped: %w", exit3)); !ok || code != 3 {
		t.Errorf("ExitCode of a wrapped exit 3 = %d, %t", code, ok)
	}
	for _, err := range []error{nil, errors.New("connection refused")} {
		if code, ok := ExitCode(err); ok {
			t.Errorf("ExitCode(%v) = %d, true", err, code)
		}
	}
}
