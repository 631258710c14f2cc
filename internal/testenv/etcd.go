package testenv

import (
	"fmt"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// StartEtcd starts an etcd of the test control plane (v3.7.3, the one
// StartCluster runs) on a loopback port, with its data in a temporary
// folder, and returns its client URL; it is stopped at the test's cleanup.
// It needs a confined network (RequireConfinedNetwork).
func StartEtcd(t testing.TB) (string, error) {
	if err := RequireConfinedNetwork(); err != nil {
		return "", err
	}
	bin, err := BinDir()
	if err != nil {
		return "", err
	}
	e := &envtest.Etcd{Path: filepath.Join(bin, "etcd"), DataDir: t.TempDir()}
	if err := e.Start(); err != nil {
		return "", fmt.Errorf("testenv: starting etcd: %w", err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	return e.URL.String(), nil
}
