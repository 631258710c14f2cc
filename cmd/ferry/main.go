// Command ferry moves a Kubernetes cluster's resources from one cluster to
// another through object storage.
package main

import (
	"os"
	"runtime/debug"

	"github.com/kubeferry/ferry/internal/cli"
)

// defaultMemoryLimit is the Go runtime's soft memory limit when
// GOMEMLIMIT is not set: the garbage collector works harder near it rather
// than let the heap double. A restore holds its verified archive in memory
// while it applies it; this keeps a 50,000-object migration under 512 MiB.
const defaultMemoryLimit = 384 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
