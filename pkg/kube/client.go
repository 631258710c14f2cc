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
	"errors"
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
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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
// API server answers. name is used in errors. Every request of the
// clients waits at most DefaultResponseTimeout for the API server's answer.
func Connect(ctx context.Context, name string, cfg *rest.Config) (*Cluster, error) {
	return ConnectWithTimeout(ctx, name, cfg, DefaultResponseTimeout)
}

// ConnectWithTimeout is Connect with responseTimeout instead of
// DefaultResponseTimeout (WithResponseTimeout).
func ConnectWithTimeout(ctx context.Context, name string, cfg *rest.Config, responseTimeout time.Duration) (*Cluster, error) {
	if name == "" {
		name = cfg.Host
	}
	cfg = WithResponseTimeout(cfg, name, responseTimeout)
	// Deprecation warnings of the API server would interleave with results
	// on every LIST of a deprecated resource; ferry reports its own.
	cfg.WarningHandler = rest.NoWarnings{}
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
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

// ErrUnsafeKubeconfig is wrapped when a kubeconfig given as data (a hub's
// ClusterCredential) would make ferry run a command or read a file.
var ErrUnsafeKubeconfig = errors.New("the kubeconfig must be self-contained")

// RESTConfigFromKubeconfig is RESTConfig for a kubeconfig held as data,
// such as a hub ClusterCredential, written by someone other than the
// process using it. It refuses, wrapping ErrUnsafeKubeconfig, what would
// make this process run a command (exec plugins), call an auth provider,
// or read a file of its own (certificate, key, CA and token files): the
// credentials must be embedded.
func RESTConfigFromKubeconfig(data []byte, kubeContext string) (*rest.Config, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	name := kubeContext
	if name == "" {
		name = raw.CurrentContext
	}
	ctx, ok := raw.Contexts[name]
	if !ok {
		return nil, fmt.Errorf("kubeconfig: no context %q", name)
	}
	if err := checkSelfContained(raw, ctx); err != nil {
		return nil, fmt.Errorf("kubeconfig context %q: %w", name, err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %q: %w", name, err)
	}
	if _, err := rest.TLSConfigFor(cfg); err != nil {
		return nil, fmt.Errorf("kubeconfig context %q: its certificate data: %w", name, err)
	}
	cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	cfg.UserAgent = "ferry"
	return cfg, nil
}

// checkSelfContained refuses ctx's user and cluster when they name an
// exec plugin, an auth provider or a file.
func checkSelfContained(raw *clientcmdapi.Config, ctx *clientcmdapi.Context) error {
	if u, ok := raw.AuthInfos[ctx.AuthInfo]; ok {
		switch {
		case u.Exec != nil:
			return fmt.Errorf("user %q runs an exec plugin (%s): %w; embed a token or a client certificate", ctx.AuthInfo, u.Exec.Command, ErrUnsafeKubeconfig)
		case u.AuthProvider != nil:
			return fmt.Errorf("user %q uses auth provider %q: %w; embed a token or a client certificate", ctx.AuthInfo, u.AuthProvider.Name, ErrUnsafeKubeconfig)
		case u.ClientCertificate != "" || u.ClientKey != "" || u.TokenFile != "":
			return fmt.Errorf("user %q names a file (client-certificate, client-key or tokenFile): %w; embed the data (kubectl config view --flatten --minify)", ctx.AuthInfo, ErrUnsafeKubeconfig)
		}
	}
	if c, ok := raw.Clusters[ctx.Cluster]; ok && c.CertificateAuthority != "" {
		return fmt.Errorf("cluster %q names a certificate-authority file: %w; embed certificate-authority-data (kubectl config view --flatten --minify)", ctx.Cluster, ErrUnsafeKubeconfig)
	}
	return nil
}
