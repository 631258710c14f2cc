package cli

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// EnvHubKubeconfig is the default of --hub: the hub's kubeconfig
// (ferry hub writes DIR/admin.kubeconfig).
const EnvHubKubeconfig = "FERRY_HUB_KUBECONFIG"

// hubFlagHelp is the help of --hub.
const hubFlagHelp = "kubeconfig of the hub (ferry hub writes DIR/admin.kubeconfig; env " + EnvHubKubeconfig + ")"

// hubScheme has the hub's ferry.dev/v1beta1 kinds, which the CLI writes.
func hubScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := hubv1beta1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// hubClient is a controller-runtime client, watches included, for the
// hub of kubeconfig.
func hubClient(kubeconfig string) (crclient.WithWatch, error) {
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, fmt.Errorf("--hub: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--hub %s: %w", kubeconfig, err)
	}
	s, err := hubScheme()
	if err != nil {
		return nil, err
	}
	return crclient.NewWithWatch(cfg, crclient.Options{Scheme: s})
}
