package testenv

import (
	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// envtest logs through controller-runtime's logger, which complains with a
// stack trace when none is set; its messages are not needed in test output.
func init() { ctrllog.SetLogger(logr.Discard()) }
