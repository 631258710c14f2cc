// Package install renders everything server mode needs in a cluster: the
// CRDs (config/crd), the Namespace, ServiceAccounts, least-privilege RBAC,
// the server Deployment, the node-agent DaemonSet, and a
// BackupStorageLocation with its credential Secret.
//
// RBAC, and why each rule is there:
//
//   - ClusterRole ferry-server-read: get, list, watch on every resource of
//     every group ("*" resources, never "*" verbs). A backup reads whatever
//     the cluster serves, Secrets included.
//   - ClusterRole ferry-server-restore: create, update, patch on every
//     resource of every group. A restore creates objects of any kind,
//     CRDs and their custom resources included, which cannot be listed in
//     advance; update and patch serve spec.existingResourcePolicy "update"
//     and spec.restoreStatus. Restores never delete what they restored; the
//     only delete is of the server's own helper pods, their Secrets and
//     Leases (pkg/helperpod), in the namespaces of the claims they serve.
//     Plus escalate and bind on roles and clusterroles, which the API
//     server requires to restore RBAC objects granting more than the
//     server itself holds.
//   - Role ferry-server (its namespace only): all verbs it uses on ferry.dev
//     objects and their status; get on Secrets (location credentials);
//     Leases for leader election; Events.
//   - Role ferry-node-agent (its namespace only; the installed agent runs
//     in server mode and reads nothing cluster-wide): get, list, watch on
//     PodVolumeBackups/Restores and update, patch on their status; get,
//     list, watch on the locations; get on Secrets (location credentials;
//     the repository password comes in as an environment variable); its
//     heartbeat Lease.
//
// No rule has "*" verbs.
package install

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/config/crd"
	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// Names of what Render creates.
const (
	ServerName      = "ferry-server"
	NodeAgentName   = "ferry-node-agent"
	CredentialsName = "ferry-credentials"
	// RepositorySecretName holds the volume repository password (key
	// RepositorySecretKey), given to the server and the node agents as
	// $FERRY_REPOSITORY_PASSWORD.
	RepositorySecretName = "ferry-repository"
	RepositorySecretKey  = "password"
	LocationName         = "default"
	// DefaultHostPodsDir is the kubelet's pods directory, mounted into the node agent.
	DefaultHostPodsDir = "/var/lib/kubelet/pods"
)

// Options say what to render.
type Options struct {
	Namespace string
	Image     string
	// ServerResources and NodeAgentResources are the containers' requests and limits.
	ServerResources, NodeAgentResources corev1.ResourceRequirements
	// NoNodeAgent leaves out the DaemonSet and its RBAC.
	NoNodeAgent bool
	// NodeAgentPrivileged runs the node agent privileged, which SELinux-
	// enforcing nodes (OpenShift, RHEL) need for it to read other pods'
	// volumes.
	NodeAgentPrivileged bool
	HostPodsDir         string
	// LocationURL, when set, renders BackupStorageLocation "default".
	LocationURL string
	// Credentials, when set, render Secret ferry-credentials (referenced by
	// the location): the keys of the location's scheme
	// (store.CredentialKeys, checked by CheckCredentials) and their values.
	Credentials map[string]string
	// RepositoryPassword, when set, renders Secret ferry-repository. The
	// source and target clusters of a migration need the same one: it
	// encrypts the pod volume data in the location.
	RepositoryPassword string
}

// ParseResources parses "cpu=100m,memory=256Mi" ("" is none). Errors name
// what the caller calls the input, and the entry.
func ParseResources(what, s string) (corev1.ResourceList, error) {
	if s == "" {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || (k != "cpu" && k != "memory") {
			return nil, fmt.Errorf("%s %q: want cpu=QUANTITY,memory=QUANTITY", what, kv)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, kv, err)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// credentialKey is what a credentials file's key may be: a variable name.
var credentialKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ReadCredentials reads a location's credentials from a file: a Google
// service-account key JSON ("type": "service_account") as is, under key
// store.EnvGoogleCredentialsJSON; anything else as an environment file of
// KEY=VALUE lines, blank lines and # comments ignored
// (AWS_ACCESS_KEY_ID=..., AZURE_STORAGE_KEY=...). Errors name the file
// and, for a bad line, its number.
func ReadCredentials(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials file: %w", err)
	}
	// A byte-order mark, as some editors on Windows save files.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if trimmed := bytes.TrimSpace(data); bytes.HasPrefix(trimmed, []byte("{")) {
		var key struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(trimmed, &key); err != nil {
			return nil, fmt.Errorf("credentials file %s: JSON, but not valid: %w", path, err)
		}
		if key.Type != "service_account" {
			return nil, fmt.Errorf("credentials file %s: JSON of type %q, not a Google service-account key (\"type\": \"service_account\"); give a service-account key, or KEY=VALUE lines", path, key.Type)
		}
		return map[string]string{store.EnvGoogleCredentialsJSON: string(trimmed)}, nil
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		k = strings.TrimSpace(k)
		if !ok || !credentialKey.MatchString(k) {
			// Never quote the line: it may hold the secret.
			return nil, fmt.Errorf("credentials file %s:%d: want KEY=VALUE, KEY being a variable name", path, n)
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		if v == "" {
			return nil, fmt.Errorf("credentials file %s:%d: %s has an empty value", path, n, k)
		}
		out[k] = v
	}
	return out, sc.Err()
}

// Render returns the objects in apply order: CRDs, Namespace, identities
// and RBAC, the Secret and location, the workloads.
func Render(o Options) []client.Object {
	ns := o.Namespace
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "ferry", "app.kubernetes.io/component": name}}
	}
	cluster := func(name string) metav1.ObjectMeta {
		m := meta(name)
		m.Namespace = ""
		return m
	}
	var objs []client.Object
	for _, c := range crd.All() {
		objs = append(objs, c)
	}
	nsMeta := cluster(ns)
	if !o.NoNodeAgent {
		// The node agent mounts the kubelet's pods directory (hostPath),
		// which the baseline and restricted Pod Security levels refuse.
		nsMeta.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	}
	objs = append(objs, &corev1.Namespace{ObjectMeta: nsMeta})
	ferryResources := []string{"backups", "restores", "schedules", "backupstoragelocations", "podvolumebackups", "podvolumerestores"}
	var statuses []string
	for _, r := range ferryResources {
		statuses = append(statuses, r+"/status")
	}
	sa := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "ServiceAccount", Name: name, Namespace: ns}
	}
	objs = append(objs,
		&corev1.ServiceAccount{ObjectMeta: meta(ServerName)},
		&rbacv1.ClusterRole{ObjectMeta: cluster(ServerName + "-read"), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		}},
		&rbacv1.ClusterRole{ObjectMeta: cluster(ServerName + "-restore"), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"create", "update", "patch"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "clusterroles"}, Verbs: []string{"escalate", "bind"}},
			// Helper pods (pkg/helperpod): removed with their Secrets and Leases.
			{APIGroups: []string{""}, Resources: []string{"pods", "secrets"}, Verbs: []string{"delete"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"delete"}},
		}},
		&rbacv1.Role{ObjectMeta: meta(ServerName), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.Group}, Resources: ferryResources, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{v1alpha1.Group}, Resources: statuses, Verbs: []string{"get", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: cluster(ServerName + "-read"), Subjects: []rbacv1.Subject{sa(ServerName)},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ServerName + "-read"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: cluster(ServerName + "-restore"), Subjects: []rbacv1.Subject{sa(ServerName)},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ServerName + "-restore"}},
		&rbacv1.RoleBinding{ObjectMeta: meta(ServerName), Subjects: []rbacv1.Subject{sa(ServerName)},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ServerName}},
	)
	if !o.NoNodeAgent {
		objs = append(objs,
			&corev1.ServiceAccount{ObjectMeta: meta(NodeAgentName)},
			&rbacv1.Role{ObjectMeta: meta(NodeAgentName), Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{v1alpha1.Group}, Resources: []string{"podvolumebackups", "podvolumerestores"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{v1alpha1.Group}, Resources: []string{"podvolumebackups/status", "podvolumerestores/status"}, Verbs: []string{"get", "update", "patch"}},
				{APIGroups: []string{v1alpha1.Group}, Resources: []string{"backupstoragelocations"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			}},
			&rbacv1.RoleBinding{ObjectMeta: meta(NodeAgentName), Subjects: []rbacv1.Subject{sa(NodeAgentName)},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: NodeAgentName}},
		)
	}
	if len(o.Credentials) > 0 {
		// data, not stringData: applied again with other keys (another
		// scheme's), server-side apply removes the keys no longer given,
		// which it cannot for stringData.
		data := map[string][]byte{}
		for k, v := range o.Credentials {
			data[k] = []byte(v)
		}
		objs = append(objs, &corev1.Secret{ObjectMeta: meta(CredentialsName), Type: corev1.SecretTypeOpaque, Data: data})
	}
	if o.RepositoryPassword != "" {
		objs = append(objs, &corev1.Secret{ObjectMeta: meta(RepositorySecretName), Type: corev1.SecretTypeOpaque, StringData: map[string]string{RepositorySecretKey: o.RepositoryPassword}})
	}
	if o.LocationURL != "" {
		bsl := &v1alpha1.BackupStorageLocation{ObjectMeta: meta(LocationName), Spec: v1alpha1.BackupStorageLocationSpec{URL: o.LocationURL, Default: true}}
		if len(o.Credentials) > 0 {
			bsl.Spec.Credential = &v1alpha1.SecretReference{Name: CredentialsName}
		}
		objs = append(objs, bsl)
	}
	objs = append(objs, deployment(o, meta(ServerName)))
	if !o.NoNodeAgent {
		objs = append(objs, daemonSet(o, meta(NodeAgentName)))
	}
	return objs
}

// All is every object Render can return for namespace (with a location,
// credentials and the node agent), for uninstall.
func All(namespace string) []client.Object {
	objs := Render(Options{Namespace: namespace, LocationURL: "s3://any", Credentials: map[string]string{"any": ""}, RepositoryPassword: "any"})
	// Earlier versions gave the node agent cluster-wide Pod reads.
	legacy := metav1.ObjectMeta{Name: NodeAgentName}
	return append(objs, &rbacv1.ClusterRole{ObjectMeta: legacy}, &rbacv1.ClusterRoleBinding{ObjectMeta: legacy})
}

func nsEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: "FERRY_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// passwordEnv is $FERRY_REPOSITORY_PASSWORD from Secret ferry-repository;
// optional, so that the server runs without it (and says why volume
// backups fail).
func passwordEnv() corev1.EnvVar {
	yes := true
	return corev1.EnvVar{Name: "FERRY_REPOSITORY_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: RepositorySecretName}, Key: RepositorySecretKey, Optional: &yes}}}
}

func deployment(o Options, m metav1.ObjectMeta) *appsv1.Deployment {
	one := int32(1)
	no, yes := false, true
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("probes")}}, PeriodSeconds: 10}
	}
	return &appsv1.Deployment{ObjectMeta: m, Spec: appsv1.DeploymentSpec{
		Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: m.Labels},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: m.Labels},
			Spec: corev1.PodSpec{
				ServiceAccountName: ServerName,
				SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: ptr(int64(65532)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "ferry", Image: o.Image,
					// The ferry image has a shell: it also runs the
					// ferry-restore-wait init container of restored pods.
					Args: serverArgs(o),
					Env:  []corev1.EnvVar{nsEnv(), passwordEnv()},
					Ports: []corev1.ContainerPort{
						{Name: "metrics", ContainerPort: 8085}, {Name: "probes", ContainerPort: 8086},
					},
					LivenessProbe: probe("/healthz"), ReadinessProbe: probe("/readyz"),
					// The root filesystem is read-only; /tmp is scratch space.
					VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
					Resources:    o.ServerResources,
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				}},
				Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			},
		},
	}}
}

// serverArgs are the server's flags: its image for the helper pods and
// init containers, and the kubelet's pods directory (--host-pods-dir)
// that its helper pods mount, as the node agents do.
func serverArgs(o Options) []string {
	flags := [][2]string{{"restore-helper-image", o.Image}}
	if o.HostPodsDir != "" && o.HostPodsDir != DefaultHostPodsDir {
		flags = append(flags, [2]string{"node-pods-dir", o.HostPodsDir})
	}
	return commandLine("server", flags...)
}

func daemonSet(o Options, m metav1.ObjectMeta) *appsv1.DaemonSet {
	priv := o.NodeAgentPrivileged
	dir := o.HostPodsDir
	if dir == "" {
		dir = DefaultHostPodsDir
	}
	prop := corev1.MountPropagationHostToContainer
	dirType := corev1.HostPathDirectory
	return &appsv1.DaemonSet{ObjectMeta: m, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: m.Labels},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: m.Labels},
			Spec: corev1.PodSpec{
				ServiceAccountName: NodeAgentName,
				// Reading every pod's volume files needs root; nothing more.
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr(int64(0))},
				// Pods with volume data can run on any node, tainted ones
				// included: so does the agent.
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{
					Name: "node-agent", Image: o.Image, Args: commandLine("node-agent", [2]string{"server"}, [2]string{"host-pods-dir", DefaultHostPodsDir}, [2]string{"volume-timeout", "10m"}),
					Env: []corev1.EnvVar{nsEnv(), passwordEnv(), fieldEnv("NODE_NAME", "spec.nodeName"),
						// The heartbeat Lease is owned by the agent's Pod, so it
						// goes when the Pod does (a node removed).
						fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_UID", "metadata.uid")},
					VolumeMounts:    []corev1.VolumeMount{{Name: "host-pods", MountPath: DefaultHostPodsDir, MountPropagation: &prop}},
					Resources:       o.NodeAgentResources,
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &priv, Privileged: &priv},
				}},
				Volumes: []corev1.Volume{{Name: "host-pods", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}}}},
			},
		},
	}}
}

func ptr[T any](v T) *T { return &v }

// WithTypeMeta sets each object's apiVersion and kind from scheme, so the
// rendered YAML is complete.
func WithTypeMeta(scheme *runtime.Scheme, objs []client.Object) error {
	for _, o := range objs {
		gvks, _, err := scheme.ObjectKinds(o)
		if err != nil {
			return err
		}
		o.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return nil
}

// commandLine is the command line of a container that runs ferry itself:
// the subcommand, then each flag of ferry's CLI as its name with "--" in
// front, followed by its value unless that is "" (a boolean flag). These
// are arguments to a program, read by ferry's own flag parsing, not
// messages to a user.
func commandLine(subcommand string, flags ...[2]string) []string {
	out := []string{subcommand}
	for _, f := range flags {
		out = append(out, "--"+f[0])
		if f[1] != "" {
			out = append(out, f[1])
		}
	}
	return out
}
