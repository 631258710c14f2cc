package hooks

// RestoreWaitContainer exports restoreWaitContainer to hooks_test.
const RestoreWaitContainer = restoreWaitContainer
