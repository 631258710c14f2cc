//go:build tools

// Package tools blank-imports containerd and its runc shim so that go.mod pins them.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
)
