package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// memberKubeconfigYAML has two clusters and a context per way of
// authenticating; the files it names are relative to it.
const memberKubeconfigYAML = `apiVersion: v1
kind: Config
current-context: certs
clusters:
- name: a
  cluster: {server: "https://a.example:6443", certificate-authority: pki/ca.crt}
- name: b
  cluster: {server: "https://b.example:6443", insecure-skip-tls-verify: true}
- name: noserver
  cluster: {insecure-skip-tls-verify: true}
users:
- name: certs
  user: {client-certificate: pki/client.crt, client-key: pki/client.key}
- name: token
  user: {token: s3cr3t-token}
- name: exec
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws-iam-authenticator, args: [token]}
- name: provider
  user:
    auth-provider: {name: gcp}
- name: tokenfile
  user: {tokenFile: /var/run/secrets/token}
contexts:
- name: certs
  context: {cluster: a, user: certs, namespace: apps}
- name: token
  context: {cluster: b, user: token}
- name: exec
  context: {cluster: a, user: exec}
- name: provider
  context: {cluster: a, user: provider}
- name: tokenfile
  context: {cluster: a, user: tokenfile}
- name: nouser
  context: {cluster: a, user: ghost}
- name: noserver
  context: {cluster: noserver, user: token}
`

// TestLoadMemberKubeconfig: cluster add keeps one context, embeds the
// files it names, and refuses credentials the hub would have to run a
// command or read a file for.
func TestLoadMemberKubeconfig(t *testing.T) {
	kc := writeMemberKubeconfig(t)
	dir := filepath.Dir(kc)
	for _, c := range []struct {
		file, context string
		want          string // error; "" for none
		server        string
	}{
		{kc, "", "", "https://a.example:6443"},
		{kc, "certs", "", "https://a.example:6443"},
		{kc, "token", "", "https://b.example:6443"},
		{kc, "exec", `user "exec" runs an exec plugin (aws-iam-authenticator): the kubeconfig must be self-contained`, ""},
		{kc, "provider", `user "provider" uses auth provider "gcp"`, ""},
		{kc, "tokenfile", `user "tokenfile" names a file (client-certificate, client-key or tokenFile)`, ""},
		{kc, "nosuch", `--kubeconfig ` + kc + ` has no context "nosuch" (it has: certs, exec, noserver, nouser, provider, token, tokenfile)`, ""},
		{kc, "nouser", `context "nouser": cannot locate user ghost`, ""},
		{kc, "noserver", `context "noserver" names no cluster with a server`, ""},
		{filepath.Join(dir, "bad-ca"), "certs", `context "certs": its certificate data: unable to load root certificates`, ""},
		{filepath.Join(dir, "missing"), "", "--kubeconfig " + filepath.Join(dir, "missing") + ": open " + filepath.Join(dir, "missing") + ": no such file or directory", ""},
	} {
		t.Run(c.context, func(t *testing.T) {
			m, err := loadMemberKubeconfig(c.file, c.context)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v; want %q", err, c.want)
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("the error shows the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkMinified(t, m, c.context, c.server)
		})
	}
}

// pems are the CA, client certificate and key files' contents.
var pems [3]string

// checkMinified checks that m has context alone (its current one), its
// cluster and user, and every file embedded.
func checkMinified(t *testing.T, m *memberKubeconfig, context, server string) {
	t.Helper()
	if context == "" {
		context = "certs"
	}
	if m.context != context || m.server != server {
		t.Errorf("context %q, server %q; want %q, %q", m.context, m.server, context, server)
	}
	cfg, err := clientcmd.Load(m.data)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Contexts) != 1 || cfg.Contexts[context] == nil || cfg.CurrentContext != context || len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 {
		t.Fatalf("kept contexts %v, clusters %v, users %v, current %q; want %s alone", cfg.Contexts, cfg.Clusters, cfg.AuthInfos, cfg.CurrentContext, context)
	}
	if context != "certs" {
		return
	}
	cl, u := cfg.Clusters["a"], cfg.AuthInfos["certs"]
	if cl == nil || u == nil {
		t.Fatalf("cluster a or user certs missing: %s", m.data)
	}
	if string(cl.CertificateAuthorityData) != pems[0] || string(u.ClientCertificateData) != pems[1] || string(u.ClientKeyData) != pems[2] {
		t.Errorf("files not embedded: ca %q, cert %q, key %q", cl.CertificateAuthorityData, u.ClientCertificateData, u.ClientKeyData)
	}
	if cl.CertificateAuthority != "" || u.ClientCertificate != "" || u.ClientKey != "" {
		t.Errorf("file paths kept: %q %q %q", cl.CertificateAuthority, u.ClientCertificate, u.ClientKey)
	}
	if cfg.Contexts["certs"].Namespace != "apps" {
		t.Errorf("context namespace %q; want apps", cfg.Contexts["certs"].Namespace)
	}
}
