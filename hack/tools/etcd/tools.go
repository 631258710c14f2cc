//go:build tools

// Package tools blank-imports the etcd server so that go.mod pins it.
package tools

import _ "go.etcd.io/etcd/server/v3"
