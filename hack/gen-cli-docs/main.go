// Command gen-cli-docs writes ferry's command reference, one Markdown page
// per command, from the cobra command tree (internal/cli.NewRoot) with
// cobra's doc package, as go-containerregistry's cmd/crane/help does.
//
//	go run ./hack/gen-cli-docs -dir docs/cli   # or: make docs
//
// The pages carry no generation date (DisableAutoGenTag), so the same tree
// gives the same bytes and `make lint` can tell a stale docs/cli by
// regenerating it into a temporary folder and comparing
// (hack/verify-cli-docs.sh). Hidden commands are left out, as cobra does.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/cobra/doc"

	"github.com/kubeferry/ferry/internal/cli"
)

func main() {
	dir := flag.String("dir", "docs/cli", "folder to write the Markdown pages into")
	flag.Parse()
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "gen-cli-docs:", err)
		os.Exit(1)
	}
	// Some flag defaults come from the environment (the default location
	// from $XDG_DATA_HOME, the node agent's --node from $NODE_NAME, the
	// server's namespace from $FERRY_NAMESPACE). Pin them, so that the
	// pages are the same on every machine and name the variable instead.
	for k, v := range map[string]string{"XDG_DATA_HOME": "$XDG_DATA_HOME", "NODE_NAME": "", "FERRY_NAMESPACE": "", "FERRY_MODE": "", "FERRY_STORAGE": ""} {
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintln(os.Stderr, "gen-cli-docs:", err)
			os.Exit(1)
		}
	}
	root := cli.NewRoot(os.Stdout, os.Stderr)
	root.DisableAutoGenTag = true
	if err := doc.GenMarkdownTree(root, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "gen-cli-docs:", err)
		os.Exit(1)
	}
}
