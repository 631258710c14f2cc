// Package kube is ferry's access to a Kubernetes API server, whatever the
// objects: clients built from kubeconfig contexts, discovery of what a
// cluster serves (GroupVersionResources and the preferred version of each
// API group), exec into a pod's container, the count of requests
// client-go retried, where each workload kind keeps its pod spec
// (PodSpecPaths), and valid object names from long keys (ObjectName).
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client-side rate limits. The API server, not the client, must be the
// bottleneck (issue 2), so these are far above what one API server
// accepts (about 1,250 creates/s on the reference machine).
const (
	DefaultQPS   = 5000
	DefaultBurst = 10000
)

// ReachTimeout bounds the first request to a cluster, so that an
// unreachable API server is reported quickly rather than after TCP retries.
const ReachTimeout = 20 * time.Second

// Cluster is a connected cluster: its REST config and clients.
type Cluster struct {
	// Name is the kubeconfig context, or the server URL when none was named.
	Name      string
	Config    *rest.Config
	Dynamic   dynamic.Interface
	Typed     kubernetes.Interface
	Discovery discovery.DiscoveryInterface
	// REST is an unversioned REST client for raw requests (LIST pages as
	// bytes, CREATE without decoding the answer); it decodes the API
	// server's Status errors like the typed clients do.
	REST    rest.Interface
	Version *version.Info
}

// RESTConfig loads a client config from kubeconfig (empty: $KUBECONFIG or
// ~/.kube/config) and context (empty: the current context), with ferry's
// QPS and burst. Errors name the file and context.
func RESTConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubeContext}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		where := kubeconfig
		if where == "" {
			where = "the default kubeconfig"
		}
		if kubeContext != "" {
			return nil, fmt.Errorf("loading context %q from %s: %w", kubeContext, where, err)
		}
		return nil, fmt.Errorf("loading %s: %w", where, err)
	}
	cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	cfg.UserAgent = "ferry"
	return cfg, nil
}

// Connect builds clients for cfg and checks, within ReachTimeout, that the
// API server answers. name is used in errors.
func Connect(ctx context.Context, name string, cfg *rest.Config) (*Cluster, error) {
	cfg = rest.CopyConfig(cfg)
	// Deprecation warnings of the API server would interleave with results
	// on every LIST of a deprecated resource; ferry reports its own.
	cfg.WarningHandler = rest.NoWarnings{}
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	}
	if name == "" {
		name = cfg.Host
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	rcfg := rest.CopyConfig(cfg)
	rcfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	raw, err := rest.UnversionedRESTClientFor(rcfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	c := &Cluster{Name: name, Config: cfg, Dynamic: dyn, Typed: typed, Discovery: typed.Discovery(), REST: raw}
	rctx, cancel := context.WithTimeout(ctx, ReachTimeout)
	defer cancel()
	body, err := typed.Discovery().RESTClient().Get().AbsPath("/version").Do(rctx).Raw()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: cannot reach the API server at %s: %w", name, cfg.Host, err)
	}
	var v version.Info
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("cluster %s: %s/version answered %q, not a Kubernetes API server", name, cfg.Host, truncate(body, 80))
	}
	c.Version = &v
	return c, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// ID returns the cluster's identity: the UID of its kube-system namespace,
// which two names for one API server (localhost, 127.0.0.1, a load
// balancer) share and two clusters never do.
func (c *Cluster) ID(ctx context.Context) (string, error) {
	ns, err := c.Typed.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("cluster %s: reading namespace kube-system: %w", c.Name, err)
	}
	return string(ns.UID), nil
}
