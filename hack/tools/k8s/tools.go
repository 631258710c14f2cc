//go:build tools

// Package tools blank-imports the control-plane commands so that go.mod pins them.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
