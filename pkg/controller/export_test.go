package controller

import "errors"

// PatchStatusForTest exposes patchStatus to the external tests.
var PatchStatusForTest = patchStatus

// IsGoneForTest reports whether err says the object is gone (errGone).
func IsGoneForTest(err error) bool { return errors.Is(err, errGone) }
