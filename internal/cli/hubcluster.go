package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kubeferry/ferry/pkg/helperpod"
	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/kube"
)

func newHubClusterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Add member clusters to the hub",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newHubClusterAddCmd(g))
	return cmd
}

// hubClusterAddOptions are ferry hub cluster add's.
type hubClusterAddOptions struct {
	g         *globals
	name      string
	hub       string
	namespace string
	podsDir   string

	// Set by Complete: the kubeconfig kept, or why it is refused.
	kc    *memberKubeconfig
	kcErr error
}

func newHubClusterAddCmd(g *globals) *cobra.Command {
	o := &hubClusterAddOptions{g: g}
	cmd := &cobra.Command{
		Use:   "add NAME --kubeconfig FILE [--context CONTEXT] --hub HUB_KUBECONFIG",
		Short: "Add a member cluster to the hub: a ClusterCredential with its kubeconfig and a Cluster",
		Long: `cluster add reads --kubeconfig, keeps only --context (default: its current context)
with that context's cluster and user, embeds the certificate, key and CA files they name, and
creates, or updates, in the hub (namespace --namespace) the ClusterCredential NAME holding that
self-contained kubeconfig and the Cluster NAME that refers to it.

A user that authenticates with an exec plugin, an auth-provider or a tokenFile is refused: the
hub never runs a command or reads a file a kubeconfig names. Use a token or a client
certificate (a ServiceAccount token, say). The kubeconfig's secrets are never printed: -o json|yaml
prints the Cluster, not the ClusterCredential.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.hub, "hub", "", hubFlagHelp+" (required)")
	fl.StringVarP(&o.namespace, "namespace", "n", metav1.NamespaceDefault, "the hub namespace of the Cluster and its ClusterCredential")
	fl.StringVar(&o.podsDir, "node-pods-dir", "", "the kubelet's pods directory on the cluster's nodes (spec.nodePodsDir; default "+helperpod.DefaultNodePodsDir+"), which the helper pods that move volume data mount")
	return cmd
}

// Complete reads and minifies the member cluster's kubeconfig; a refusal
// is kept for Validate, which reports the flags first.
func (o *hubClusterAddOptions) Complete(_ *cobra.Command, args []string) error {
	o.name = args[0]
	if o.hub == "" {
		o.hub = os.Getenv(EnvHubKubeconfig)
	}
	if o.g.kubeconfig != "" {
		o.kc, o.kcErr = loadMemberKubeconfig(o.g.kubeconfig, o.g.context)
	}
	return nil
}

func (o *hubClusterAddOptions) Validate() error {
	if msgs := validation.IsDNS1123Subdomain(o.name); len(msgs) > 0 {
		return fmt.Errorf("cluster name %q: %s", o.name, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Label(o.namespace); len(msgs) > 0 {
		return fmt.Errorf("--namespace %q: %s", o.namespace, strings.Join(msgs, "; "))
	}
	if o.hub == "" {
		return fmt.Errorf("--hub is required (or $%s): the hub's kubeconfig", EnvHubKubeconfig)
	}
	if o.g.kubeconfig == "" {
		return errors.New("--kubeconfig is required: the kubeconfig of the cluster to add")
	}
	return o.kcErr
}

// Run creates or updates the ClusterCredential, then the Cluster.
func (o *hubClusterAddOptions) Run(ctx context.Context) error {
	c, err := hubClient(o.hub)
	if err != nil {
		return err
	}
	// Written whole, never read: the hub lets only its controllers read
	// credentials.
	cred := &hubv1beta1.ClusterCredential{ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: o.namespace}, Kubeconfig: o.kc.data}
	err = c.Create(ctx, cred)
	if apierrors.IsAlreadyExists(err) {
		err = c.Update(ctx, cred)
	}
	if err != nil {
		return err
	}
	cl := &hubv1beta1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: o.namespace}}
	op, err := controllerutil.CreateOrUpdate(ctx, c, cl, func() error {
		cl.Spec.CredentialRef = hubv1beta1.LocalObjectReference{Name: o.name}
		cl.Spec.Context = o.kc.context
		cl.Spec.NodePodsDir = o.podsDir
		return nil
	})
	if err != nil {
		return err
	}
	if o.g.output != "table" {
		// The Cluster only: the ClusterCredential holds the secrets.
		cl.APIVersion, cl.Kind = hubv1beta1.SchemeGroupVersion.String(), "Cluster"
		return printObject(o.g.stdout, o.g.output, cl)
	}
	verb := "added"
	if op != controllerutil.OperationResultCreated {
		verb = "updated"
	}
	fmt.Fprintf(o.g.stdout, "cluster %s %s (context %s, server %s)\n", o.name, verb, o.kc.context, o.kc.server)
	return nil
}

// memberKubeconfig is a member cluster's kubeconfig as the hub keeps it:
// one context, its cluster and user, every file embedded.
type memberKubeconfig struct {
	data            []byte
	context, server string
}

// loadMemberKubeconfig reads file and keeps context (default: its current
// context) alone, with the files it names embedded. A user whose
// credentials the hub would have to run a command or read a file for is
// refused.
func loadMemberKubeconfig(file, context string) (*memberKubeconfig, error) {
	cfg, err := clientcmd.LoadFromFile(file)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", file, err)
	}
	if context == "" {
		if context = cfg.CurrentContext; context == "" {
			return nil, fmt.Errorf("--kubeconfig %s has no current context: choose one with --context (%s)", file, contextNames(cfg))
		}
	}
	kctx, ok := cfg.Contexts[context]
	if !ok {
		return nil, fmt.Errorf("--kubeconfig %s has no context %q (it has: %s)", file, context, contextNames(cfg))
	}
	cfg.CurrentContext = context
	if err := clientcmdapi.MinifyConfig(cfg); err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: context %q: %w", file, context, err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: context %q: embedding its files: %w", file, context, err)
	}
	cluster := cfg.Clusters[kctx.Cluster]
	if cluster == nil || cluster.Server == "" {
		return nil, fmt.Errorf("--kubeconfig %s: context %q names no cluster with a server", file, context)
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, err
	}
	// What the hub will load it with: refused here as there.
	if _, err := kube.RESTConfigFromKubeconfig(data, context); err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w; the hub never runs a command or reads a file a kubeconfig names", file, err)
	}
	return &memberKubeconfig{data: data, context: context, server: cluster.Server}, nil
}

// contextNames lists cfg's contexts, sorted.
func contextNames(cfg *clientcmdapi.Config) string {
	var names []string
	for n := range cfg.Contexts {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "no contexts"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
