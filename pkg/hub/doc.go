// Package hub is `ferry hub`, ferry's own Kubernetes-style API server
// (k8s.io/apiserver) for the ferry.dev Cluster, ClusterCredential and
// Migration kinds: its data directory (CA, serving certificate, tokens,
// encryption key, admin kubeconfig), its storage (embedded etcd, or an
// existing one), its authentication and authorizer, and the server itself.
// See docs/design.md#the-hub.
package hub
