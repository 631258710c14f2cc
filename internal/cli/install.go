package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/install"
	"github.com/kubeferry/ferry/pkg/store"
)

// installFlags are the flags of install and uninstall.
type installFlags struct {
	namespace                          string
	image                              string
	serverRequests, serverLimits       string
	nodeAgentRequests, nodeAgentLimits string
	noNodeAgent, nodeAgentPrivileged   bool
	hostPodsDir                        string
	locationURL, credentialsFile       string
	repositoryPasswordFile             string
	apply, dryRun                      bool
}

func (f *installFlags) register(cmd *cobra.Command, render bool) {
	fl := cmd.Flags()
	fl.StringVarP(&f.namespace, "namespace", "n", DefaultNamespace, "namespace of the server, its objects and its Secrets")
	if !render {
		return
	}
	fl.BoolVar(&f.noNodeAgent, "no-node-agent", false, "leave out the node-agent DaemonSet and its RBAC")
	fl.BoolVar(&f.nodeAgentPrivileged, "node-agent-privileged", false, "run the node agent privileged (SELinux-enforcing nodes, such as OpenShift's, need it to read other pods' volumes)")
	fl.StringVar(&f.image, "image", "ghcr.io/kubeferry/ferry:"+imageTag(), "container image of the server and the node agent")
	fl.StringVar(&f.serverRequests, "server-requests", "cpu=100m,memory=256Mi", "the server's resource requests: cpu=Q,memory=Q")
	fl.StringVar(&f.serverLimits, "server-limits", "memory=1Gi", "the server's resource limits: cpu=Q,memory=Q")
	fl.StringVar(&f.nodeAgentRequests, "node-agent-requests", "cpu=100m,memory=128Mi", "the node agent's resource requests")
	fl.StringVar(&f.nodeAgentLimits, "node-agent-limits", "memory=1Gi", "the node agent's resource limits")
	fl.StringVar(&f.hostPodsDir, "host-pods-dir", install.DefaultHostPodsDir, "the kubelet's pods directory on the nodes, mounted into the node agent and into the server's helper pods (its --node-pods-dir)")
	fl.StringVar(&f.locationURL, "location-url", "", "render BackupStorageLocation \"default\" with this URL (as --storage: s3://bucket?endpoint=...&region=...)")
	fl.StringVar(&f.credentialsFile, "credentials-file", "", "render Secret ferry-credentials for the location from this file: KEY=VALUE lines of the location's scheme (s3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optional AWS_SESSION_TOKEN, AWS_REGION; azblob: AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY, or AZURE_STORAGE_CONNECTION_STRING), or for gs a service-account key JSON file as downloaded")
	fl.StringVar(&f.repositoryPasswordFile, "repository-password-file", "", "render Secret ferry-repository with the volume repository password from this file, for pod volume data (source and target need the same one); without it, volume backups fail with the reason")
	fl.BoolVar(&f.apply, "apply", false, "apply the objects to the cluster (server-side apply) instead of printing them")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the objects (the default; kept for kubectl habits)")
}

func imageTag() string {
	if Version == "dev" {
		return "latest"
	}
	return Version
}

// validate checks the flags without reading the files they name.
func (f *installFlags) validate() error {
	if errs := validation.IsDNS1123Label(f.namespace); len(errs) > 0 {
		return fmt.Errorf("--namespace %q: %s", f.namespace, errs[0])
	}
	if f.image == "" {
		return fmt.Errorf("--image is empty: name the image of the server and the node agent")
	}
	var o install.Options
	if err := f.resources(&o); err != nil {
		return err
	}
	if f.credentialsFile != "" && f.locationURL == "" {
		return fmt.Errorf("--credentials-file needs --location-url")
	}
	if f.locationURL != "" {
		if err := store.ValidateURL(f.locationURL); err != nil {
			return fmt.Errorf("--location-url: %w", err)
		}
	}
	return nil
}

// resources parses the resource flags into o.
func (f *installFlags) resources(o *install.Options) error {
	var err error
	for _, r := range []struct {
		flag, val string
		into      *corev1.ResourceList
	}{
		{"server-requests", f.serverRequests, &o.ServerResources.Requests},
		{"server-limits", f.serverLimits, &o.ServerResources.Limits},
		{"node-agent-requests", f.nodeAgentRequests, &o.NodeAgentResources.Requests},
		{"node-agent-limits", f.nodeAgentLimits, &o.NodeAgentResources.Limits},
	} {
		if *r.into, err = install.ParseResources("--"+r.flag, r.val); err != nil {
			return err
		}
	}
	return nil
}

// objects renders what install applies, reading the credentials and
// password files.
func (f *installFlags) objects() ([]client.Object, error) {
	o := install.Options{Namespace: f.namespace, Image: f.image, NoNodeAgent: f.noNodeAgent, NodeAgentPrivileged: f.nodeAgentPrivileged, HostPodsDir: f.hostPodsDir, LocationURL: f.locationURL}
	if err := f.resources(&o); err != nil {
		return nil, err
	}
	var err error
	if f.credentialsFile != "" {
		if o.Credentials, err = install.ReadCredentials(f.credentialsFile); err != nil {
			return nil, fmt.Errorf("--credentials-file: %w", err)
		}
		if len(o.Credentials) == 0 {
			return nil, fmt.Errorf("--credentials-file %s: no KEY=VALUE lines", f.credentialsFile)
		}
		if err := store.CheckURLCredentials(f.locationURL, o.Credentials); err != nil {
			return nil, fmt.Errorf("--credentials-file %s for --location-url: %w", f.credentialsFile, err)
		}
	}
	if f.repositoryPasswordFile != "" {
		if o.RepositoryPassword, err = readPassword(f.repositoryPasswordFile); err != nil {
			return nil, err
		}
	}
	objs := install.Render(o)
	return objs, install.WithTypeMeta(install.Scheme(), objs)
}

// installOptions are install's.
type installOptions struct {
	*globals
	installFlags
}

func newInstallCmd(g *globals) *cobra.Command {
	o := &installOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Print (or --apply) what server mode needs: CRDs, namespace, RBAC, the server Deployment, the node-agent DaemonSet, a location",
		Args:  cobra.NoArgs,
		RunE:  runE(o),
	}
	o.register(cmd, true)
	return cmd
}

func (o *installOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *installOptions) Validate() error {
	if o.apply && o.dryRun {
		return fmt.Errorf("--apply and --dry-run: give one")
	}
	return o.validate()
}

func (o *installOptions) Run(ctx context.Context) error {
	objs, err := o.objects()
	if err != nil {
		return err
	}
	if !o.apply {
		return printObjects(o.globals, objs)
	}
	cluster, err := connect(ctx, o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	return install.Apply(ctx, cluster, objs, o.stdout)
}

// uninstallOptions are uninstall's.
type uninstallOptions struct {
	*globals
	installFlags
}

func newUninstallCmd(g *globals) *cobra.Command {
	o := &uninstallOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Delete what `ferry install` applied, CRDs included (the store keeps every backup)",
		Args:  cobra.NoArgs,
		RunE:  runE(o),
	}
	o.register(cmd, false)
	return cmd
}

func (o *uninstallOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *uninstallOptions) Validate() error { return nil }

func (o *uninstallOptions) Run(ctx context.Context) error {
	objs := install.All(o.namespace)
	if err := install.WithTypeMeta(install.Scheme(), objs); err != nil {
		return err
	}
	cluster, err := connect(ctx, o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	return install.Delete(ctx, cluster, objs, o.stdout)
}

// printObjects prints objs as a multi-document YAML stream (-o yaml, the
// default) or a JSON List (-o json).
func printObjects(g *globals, objs []client.Object) error {
	var us []any
	for _, o := range objs {
		u, err := install.ToUnstructured(o)
		if err != nil {
			return err
		}
		us = append(us, u.Object)
	}
	if g.output == "json" {
		return printObject(g.stdout, "json", list(us))
	}
	for _, o := range us {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "---\n%s", b)
	}
	return nil
}
