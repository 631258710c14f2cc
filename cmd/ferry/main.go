// Command ferry moves a Kubernetes cluster's resources from one cluster to
// another through object storage.
//
// ferry sets no soft memory limit of its own: a restore's memory does not
// grow with the archive (the items' bytes wait in a spool file on local
// disk, docs/design.md#the-archive-format), so it needs none. GOMEMLIMIT,
// when set, is the Go runtime's as usual.
package main

import (
	"os"

	"github.com/kubeferry/ferry/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
