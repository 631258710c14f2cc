package kube_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/kube"
)

// TestRESTConfigFromKubeconfig: a kubeconfig held as data loads when it is
// self-contained, and is refused, naming what, when it would make ferry
// run a command or read a file.
func TestRESTConfigFromKubeconfig(t *testing.T) {
	const head = "apiVersion: v1\nkind: Config\ncurrent-context: a\ncontexts:\n- {name: a, context: {cluster: c, user: u}}\n- {name: b, context: {cluster: c, user: v}}\n"
	const cluster = "clusters:\n- {name: c, cluster: {server: \"https://10.0.0.1:6443\", insecure-skip-tls-verify: true}}\n"
	cases := []struct {
		name, users, ctx, want string
		unsafe                 bool
	}{
		{name: "token", users: "- {name: u, user: {token: abc}}\n"},
		{name: "other context", users: "- {name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: x}}}\n- {name: v, user: {token: abc}}\n", ctx: "b"},
		{name: "exec plugin", users: "- {name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/touch}}}\n", want: `user "u" runs an exec plugin (/bin/touch)`, unsafe: true},
		{name: "auth provider", users: "- {name: u, user: {auth-provider: {name: oidc}}}\n", want: `auth provider "oidc"`, unsafe: true},
		{name: "token file", users: "- {name: u, user: {tokenFile: /etc/shadow}}\n", want: "names a file", unsafe: true},
		{name: "client key file", users: "- {name: u, user: {client-certificate: /a.crt, client-key: /a.key}}\n", want: "names a file", unsafe: true},
		{name: "unknown context", users: "- {name: u, user: {token: abc}}\n", ctx: "nope", want: `no context "nope"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := kube.RESTConfigFromKubeconfig([]byte(head+cluster+"users:\n"+c.users), c.ctx)
			if c.want == "" {
				if err != nil || cfg.Host != "https://10.0.0.1:6443" || cfg.BearerToken != "abc" {
					t.Fatalf("got %v, %v", cfg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, kube.ErrUnsafeKubeconfig) != c.unsafe {
				t.Fatalf("error %v, want %q (unsafe: %v)", err, c.want, c.unsafe)
			}
		})
	}
	bad := "apiVersion: v1\nkind: Config\ncurrent-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: \"https://h\", certificate-authority-data: Zm9v}}]\nusers: [{name: u, user: {token: t}}]\n"
	if _, err := kube.RESTConfigFromKubeconfig([]byte(bad), ""); err == nil || !strings.Contains(err.Error(), "its certificate data") {
		t.Fatalf("a CA that is not PEM: %v", err)
	}
	ca := "apiVersion: v1\nkind: Config\ncurrent-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: \"https://h\", certificate-authority: /etc/ca.crt}}]\nusers: [{name: u, user: {token: t}}]\n"
	if _, err := kube.RESTConfigFromKubeconfig([]byte(ca), ""); !errors.Is(err, kube.ErrUnsafeKubeconfig) || !strings.Contains(err.Error(), "certificate-authority file") {
		t.Fatalf("a CA file: %v", err)
	}
}
