// Command ferry moves a Kubernetes cluster's resources from one cluster to
// another through object storage.
package main

import (
	"os"

	"github.com/kubeferry/ferry/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
