package hub_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/hub"
)

// TestRestart: objects survive a stop and start of the hub on the same data
// directory, and the admin kubeconfig of the first start still works.
func TestRestart(t *testing.T) {
	requireServers(t)
	dir := t.TempDir()
	h := startHub(t, hub.Options{DataDir: dir})
	create(t, dynamicClient(t, h.admin), clusterObj("kept"))
	firstAdmin := h.admin
	h.stop()
	h = startHub(t, hub.Options{DataDir: dir})
	if h.admin.BearerToken != firstAdmin.BearerToken {
		t.Errorf("the admin token changed across a restart")
	}
	if _, err := dynamicClient(t, h.admin).Resource(clustersV1beta1).Namespace(ns).Get(context.Background(), "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("after a restart: %v", err)
	}
}
