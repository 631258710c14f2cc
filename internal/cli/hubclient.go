package cli

import (
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/hub/controller"
)

// EnvHubKubeconfig is the default of --hub: the hub's kubeconfig
// (ferry hub writes DIR/admin.kubeconfig).
const EnvHubKubeconfig = "FERRY_HUB_KUBECONFIG"

// hubFlagHelp is the help of --hub.
const hubFlagHelp = "kubeconfig of the hub (ferry hub writes DIR/admin.kubeconfig; env " + EnvHubKubeconfig + ")"

// hubScheme has the hub's ferry.dev/v1beta1 kinds, which the CLI writes:
// the hub controllers' own scheme.
func hubScheme() (*runtime.Scheme, error) { return controller.Scheme(), nil }

// hubClient is a controller-runtime client, watches included, for the
// hub of kubeconfig.
func hubClient(kubeconfig string) (crclient.WithWatch, error) {
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, fmt.Errorf("--hub: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--hub %s: not a usable kubeconfig: %w", kubeconfig, err)
	}
	if err := checkHub(cfg, kubeconfig); err != nil {
		return nil, err
	}
	s, err := hubScheme()
	if err != nil {
		return nil, err
	}
	return crclient.NewWithWatch(cfg, crclient.Options{Scheme: s})
}

// hubCheckTimeout bounds checkHub.
const hubCheckTimeout = 30 * time.Second

// checkHub asks the server of cfg for ferry.dev/v1beta1, so that a hub
// that is down, refuses the credentials, or is not a hub at all is named
// as such.
func checkHub(cfg *rest.Config, kubeconfig string) error {
	dcfg := rest.CopyConfig(cfg)
	dcfg.Timeout = hubCheckTimeout
	d, err := discovery.NewDiscoveryClientForConfig(dcfg)
	if err != nil {
		return fmt.Errorf("--hub %s: %w", kubeconfig, err)
	}
	_, err = d.ServerResourcesForGroupVersion(hubv1beta1.SchemeGroupVersion.String())
	switch {
	case err == nil:
		return nil
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("--hub %s: the hub at %s refused its credentials (401): check the kubeconfig's token or certificate", kubeconfig, cfg.Host)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("--hub %s: %s is not a ferry hub: it serves no %s", kubeconfig, cfg.Host, hubv1beta1.SchemeGroupVersion)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("--hub %s: the hub at %s forbids this user discovery: %w", kubeconfig, cfg.Host, err)
	}
	return fmt.Errorf("--hub %s: cannot reach the hub at %s: %w", kubeconfig, cfg.Host, err)
}
