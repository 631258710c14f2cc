package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Cluster is one running local control plane: etcd and kube-apiserver
// (started by controller-runtime envtest) plus kube-controller-manager.
// There are no kubelets, so Pods stay Pending. Get one from StartCluster,
// StartClusters or StartNamedClusters; end it with Stop.
type Cluster struct {
	// Name is the context name in KubeconfigPath (and in files written by
	// WriteKubeconfig), e.g. "src", "dst" or "c0".
	Name string
	// Config talks to the API server as an admin user (client certificate,
	// group system:masters) with client-side rate limiting off (QPS -1).
	// It is shared: use rest.CopyConfig before changing it.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file (certificates embedded) with one
	// context named Name, which is also the current context.
	KubeconfigPath string
	// Dir is the cluster's temporary directory (kubeconfig, CA file, logs);
	// Stop removes it.
	Dir string
	// CertDir is the API server's certificate directory (envtest's), holding
	// sa-signer.key/.crt among others.
	CertDir string
	// CAFile is the PEM file of the CA that signed the API server's serving
	// certificate (also published as kube-root-ca.crt by KCM).
	CAFile string
	// KCMLogPath is the file receiving kube-controller-manager's stdout and
	// stderr; APIServerLogPath the same for kube-apiserver.
	KCMLogPath       string
	APIServerLogPath string
	// Node is the cluster's real node, for clusters from StartNodeClusters;
	// nil otherwise.
	Node *Node

	env      *envtest.Environment
	apiLog   *os.File
	kcm      *daemon
	stopOnce sync.Once
	stopErr  error
}

// StartCluster starts one cluster whose context is called name. See
// StartNamedClusters for errors and cleanup.
func StartCluster(ctx context.Context, t testing.TB, name string) (*Cluster, error) {
	if t != nil {
		t.Helper()
	}
	cs, err := StartNamedClusters(ctx, t, name)
	if err != nil {
		return nil, err
	}
	return cs[0], nil
}

// StartClusters starts n independent clusters in parallel, named "c0" ..
// "c<n-1>". See StartNamedClusters.
func StartClusters(ctx context.Context, t testing.TB, n int) ([]*Cluster, error) {
	if t != nil {
		t.Helper()
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	return StartNamedClusters(ctx, t, names...)
}

// StartNamedClusters starts one independent cluster per name, in parallel,
// and returns them in the order of names. Each start takes a few seconds
// (about 330 MB + 115 MB RSS per cluster); the binaries come from BinDir,
// which may build them first (minutes).
//
// A cluster is returned only once its API server answers and KCM has created
// the "default" ServiceAccount in namespace "default" (timeout 60 s), so
// Pods, Deployments and namespace deletion work. If t is non-nil,
// t.Cleanup(Stop) is registered for each cluster.
//
// Clusters start only in a network namespace with nothing but loopback
// (RequireConfinedNetwork). Errors: that, no names, duplicate names, BinDir failure, envtest start failure,
// KCM exiting early or the ServiceAccount timeout (the error quotes the end
// of the KCM log). On error every cluster already started is stopped.
func StartNamedClusters(ctx context.Context, t testing.TB, names ...string) ([]*Cluster, error) {
	if t != nil {
		t.Helper()
	}
	if err := checkNames(names); err != nil {
		return nil, err
	}
	if err := RequireConfinedNetwork(); err != nil {
		return nil, err
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	return startAll(t, names, func(name string) (*Cluster, error) { return startCluster(ctx, bin, name) })
}

// checkNames refuses no names, an empty name or a duplicate.
func checkNames(names []string) error {
	if len(names) == 0 {
		return errors.New("testenv: StartClusters: no clusters requested")
	}
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] {
			return fmt.Errorf("testenv: StartClusters: empty or duplicate cluster name %q", n)
		}
		seen[n] = true
	}
	return nil
}

// startAll starts one cluster per name with start, in parallel, and
// returns them in the order of names. On any error it stops those that
// started; with t, it registers each cluster's Stop as a cleanup.
func startAll(t testing.TB, names []string, start func(name string) (*Cluster, error)) ([]*Cluster, error) {
	clusters := make([]*Cluster, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i], errs[i] = start(name)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range clusters {
			if c != nil {
				_ = c.Stop()
			}
		}
		return nil, err
	}
	if t != nil {
		for _, c := range clusters {
			t.Cleanup(func() {
				if err := c.Stop(); err != nil {
					t.Logf("testenv: stopping cluster %s: %v", c.Name, err)
				}
			})
		}
	}
	return clusters, nil
}

// startCluster starts one cluster; on error it cleans up after itself.
func startCluster(ctx context.Context, bin, name string) (_ *Cluster, err error) {
	dir, err := os.MkdirTemp("", "ferry-testenv-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("testenv: cluster %s: %w", name, err)
	}
	c := &Cluster{
		Name:             name,
		Dir:              dir,
		KubeconfigPath:   filepath.Join(dir, "kubeconfig"),
		CAFile:           filepath.Join(dir, "ca.crt"),
		KCMLogPath:       filepath.Join(dir, "kube-controller-manager.log"),
		APIServerLogPath: filepath.Join(dir, "kube-apiserver.log"),
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
			err = fmt.Errorf("testenv: cluster %s: %w", name, err)
		}
	}()
	if c.apiLog, err = os.Create(c.APIServerLogPath); err != nil {
		return nil, err
	}
	api := &envtest.APIServer{
		Path: filepath.Join(bin, "kube-apiserver"),
		Out:  c.apiLog,
		Err:  c.apiLog,
	}
	// The network namespace has nothing but lo (RequireConfinedNetwork), so
	// there is no default route to pick an advertise address from, and the
	// endpoint reconciler refuses a loopback one.
	api.Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	c.env = &envtest.Environment{
		BinaryAssetsDirectory: bin,
		ControlPlane: envtest.ControlPlane{
			APIServer: api,
			Etcd:      &envtest.Etcd{Path: filepath.Join(bin, "etcd")},
		},
		ControlPlaneStartTimeout: 60 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	cfg, err := c.env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest (kube-apiserver log %s): %w", c.APIServerLogPath, err)
	}
	c.CertDir = c.env.ControlPlane.APIServer.CertDir
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	c.Config = cfg
	if err = os.WriteFile(c.CAFile, cfg.CAData, 0o600); err != nil {
		return nil, err
	}
	if err = writeKubeconfig(c.KubeconfigPath, namedConfig{name: name, cfg: cfg}); err != nil {
		return nil, err
	}
	if c.kcm, err = startKCM(bin, c); err != nil {
		return nil, err
	}
	if err = c.waitDefaultServiceAccount(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// Stop stops kube-controller-manager (SIGTERM, SIGKILL after 10 s), then
// etcd and kube-apiserver, and removes Dir. A cluster with a node first
// stops the node's daemons, and last removes what remains in its network
// namespace: processes, mounts, cgroups, the namespace itself and the
// data of its hostPath volumes. It is safe to call more than
// once and on a partly started cluster; later calls return the first result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		var hostPaths []string
		if c.Node != nil {
			hostPaths = c.hostPathVolumes()
			errs = append(errs, c.Node.stopDaemons())
		}
		if c.kcm != nil {
			errs = append(errs, c.kcm.stop(10*time.Second))
		}
		if c.env != nil {
			if err := c.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop envtest: %w", err))
			}
		}
		if c.apiLog != nil {
			c.apiLog.Close()
		}
		if c.Node != nil {
			errs = append(errs, reapNode(c.Node.Netns, c.Dir))
			for _, p := range hostPaths {
				errs = append(errs, os.RemoveAll(p))
			}
		}
		if c.Dir != "" {
			errs = append(errs, os.RemoveAll(c.Dir))
		}
		if err := errors.Join(errs...); err != nil {
			c.stopErr = fmt.Errorf("testenv: stop cluster %s: %w", c.Name, err)
		}
	})
	return c.stopErr
}

// kcmBinary is split out so a missing binary gives a clear error.
func kcmBinary(bin string) (string, error) {
	p := filepath.Join(bin, "kube-controller-manager")
	if _, err := exec.LookPath(p); err != nil {
		return "", fmt.Errorf("kube-controller-manager not found in %s: %w", bin, err)
	}
	return p, nil
}
