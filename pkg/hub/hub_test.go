package hub_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeferry/ferry/internal/testenv"
	"github.com/kubeferry/ferry/pkg/hub"
)

var (
	migrationsV1alpha1 = schema.GroupVersionResource{Group: "ferry.dev", Version: "v1alpha1", Resource: "migrations"}
	migrationsV1beta1  = schema.GroupVersionResource{Group: "ferry.dev", Version: "v1beta1", Resource: "migrations"}
	clustersV1beta1    = schema.GroupVersionResource{Group: "ferry.dev", Version: "v1beta1", Resource: "clusters"}
	credentialsV1beta1 = schema.GroupVersionResource{Group: "ferry.dev", Version: "v1beta1", Resource: "clustercredentials"}
	storeCredsV1beta1  = schema.GroupVersionResource{Group: "ferry.dev", Version: "v1beta1", Resource: "credentials"}
)

// runningHub is a hub served in this process.
type runningHub struct {
	*hub.Server
	admin *rest.Config
	stop  func()
}

// requireServers skips under -short and fails outside a confined network.
func requireServers(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a hub (-short)")
	}
	if err := testenv.RequireConfinedNetwork(); err != nil {
		t.Fatal(err)
	}
}

// startHub starts a hub on dir (port 0 unless o says otherwise) and waits
// until it is ready; stop (also at cleanup) stops it and its etcd.
func startHub(t *testing.T, o hub.Options) *runningHub {
	t.Helper()
	if o.BindAddress == nil {
		o.BindAddress = net.IPv4(127, 0, 0, 1)
	}
	s, err := hub.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("hub: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("hub did not stop within a minute")
		}
	}
	t.Cleanup(stop)
	admin, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin)
	return &runningHub{Server: s, admin: admin, stop: stop}
}

// waitReady waits until /readyz answers 200.
func waitReady(t *testing.T, cfg *rest.Config) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, err := client.Get(cfg.Host + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("hub at %s not ready: %v", cfg.Host, err)
	}
}

func dynamicClient(t *testing.T, cfg *rest.Config) *dynamic.DynamicClient {
	t.Helper()
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
