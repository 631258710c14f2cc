package servermode

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PatchStatusForTest exposes patchStatus to the external tests.
func PatchStatusForTest(ctx context.Context, c client.Client, obj, orig client.Object) error {
	return patchStatus(ctx, c, c, obj, orig)
}

// IsGoneForTest reports whether err says the object is gone (errGone).
func IsGoneForTest(err error) bool { return errors.Is(err, errGone) }
