package hooks_test

import (
	"testing"

	"github.com/kubeferry/ferry/pkg/hooks"
	"github.com/kubeferry/ferry/pkg/transform"
)

// TestRestoreWaitName checks that hooks' copy of the restore-wait init
// container's name (hooks cannot import transform, which may use hooks)
// is transform's.
func TestRestoreWaitName(t *testing.T) {
	if hooks.RestoreWaitContainer != transform.RestoreWaitContainer {
		t.Errorf("hooks knows the restore-wait init container as %q, transform names it %q", hooks.RestoreWaitContainer, transform.RestoreWaitContainer)
	}
}
