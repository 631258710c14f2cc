package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes ONE kubeconfig file at path holding every given
// cluster as its own cluster, user and context, each named by Cluster.Name
// (so a CLI under test can be run with "--kubeconfig path --context src").
// Certificates and keys are embedded (no references to other files). The
// current-context is the first cluster's name. Parent directories are
// created; the file is written with mode 0600 and replaced if it exists.
//
// Errors: no clusters, an empty or duplicate Name, a cluster without Config,
// or a write failure.
func WriteKubeconfig(path string, clusters ...*Cluster) error {
	if len(clusters) == 0 {
		return fmt.Errorf("testenv: WriteKubeconfig %s: no clusters", path)
	}
	named := make([]namedConfig, 0, len(clusters))
	for _, c := range clusters {
		if c == nil || c.Config == nil {
			return fmt.Errorf("testenv: WriteKubeconfig %s: cluster without Config", path)
		}
		named = append(named, namedConfig{name: c.Name, cfg: c.Config})
	}
	return writeKubeconfig(path, named...)
}

type namedConfig struct {
	name string
	cfg  *rest.Config
}

// writeKubeconfig builds and writes a kubeconfig with one context per entry.
func writeKubeconfig(path string, entries ...namedConfig) error {
	kc := clientcmdapi.NewConfig()
	for _, e := range entries {
		if e.name == "" {
			return fmt.Errorf("testenv: kubeconfig %s: cluster with empty Name", path)
		}
		if _, dup := kc.Contexts[e.name]; dup {
			return fmt.Errorf("testenv: kubeconfig %s: duplicate cluster name %q", path, e.name)
		}
		server := e.cfg.Host
		if !strings.Contains(server, "://") {
			server = "https://" + server
		}
		cl := clientcmdapi.NewCluster()
		cl.Server = strings.TrimSuffix(server, "/")
		cl.CertificateAuthorityData = e.cfg.CAData
		cl.TLSServerName = e.cfg.ServerName
		cl.InsecureSkipTLSVerify = e.cfg.Insecure
		kc.Clusters[e.name] = cl

		ai := clientcmdapi.NewAuthInfo()
		ai.ClientCertificateData = e.cfg.CertData
		ai.ClientKeyData = e.cfg.KeyData
		ai.Token = e.cfg.BearerToken
		ai.Username = e.cfg.Username
		ai.Password = e.cfg.Password
		kc.AuthInfos[e.name] = ai

		ctx := clientcmdapi.NewContext()
		ctx.Cluster = e.name
		ctx.AuthInfo = e.name
		kc.Contexts[e.name] = ctx
		if kc.CurrentContext == "" {
			kc.CurrentContext = e.name
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("testenv: kubeconfig %s: %w", path, err)
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("testenv: write kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
