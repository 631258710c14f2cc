package hub

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// newAuthenticator authenticates client certificates signed by ca (the
// user is the subject's common name, the groups its organizations) and the
// static tokens of tokenFiles (kube-apiserver's --token-auth-file CSV).
// Nothing else: a request with neither is refused with 401.
func newAuthenticator(ca *CA, tokenFiles []string) (authenticator.Request, error) {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = pool
	auths := []authenticator.Request{x509request.New(opts, x509request.CommonNameUserConversion)}
	for _, f := range tokenFiles {
		tokens, err := tokenfile.NewCSV(f)
		if err != nil {
			return nil, fmt.Errorf("token file %s: %w", f, err)
		}
		auths = append(auths, bearertoken.New(tokens))
	}
	return union.New(auths...), nil
}

// readVerbs are the verbs GroupViewers may use.
var readVerbs = []string{"get", "list", "watch"}

// healthPaths are the non-resource paths any authenticated user may GET;
// with discoveryPrefixes, kube-apiserver's system:discovery role, so that
// a client learns what the hub serves and gets a 403 on the resource
// itself, which names it.
var healthPaths = []string{"/healthz", "/livez", "/readyz", "/version", "/version/", "/api", "/apis", "/openapi"}

// discoveryPrefixes are the path prefixes of discovery and OpenAPI.
var discoveryPrefixes = []string{"/api/", "/apis/", "/openapi/"}

func isDiscovery(path string) bool {
	if slices.Contains(healthPaths, path) {
		return true
	}
	for _, p := range discoveryPrefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// authorize is the hub's authorizer (docs/design.md#the-hub):
// GroupMasters and GroupAdmins may do everything; GroupViewers may get,
// list and watch every resource but ClusterCredentials and Credentials
// (secretResources), and GET every
// non-resource path (/metrics, /reports/); any authenticated user may GET
// the health paths, /version, discovery and OpenAPI; everything else is
// forbidden.
// secretResources are the kinds that hold secrets, which GroupViewers
// may not read.
var secretResources = map[string]bool{"clustercredentials": true, "credentials": true}

func authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionDeny, "no user", nil
	}
	groups := u.GetGroups()
	switch {
	case slices.Contains(groups, GroupMasters) || slices.Contains(groups, GroupAdmins):
		return authorizer.DecisionAllow, "", nil
	case !a.IsResourceRequest() && a.GetVerb() == "get" && isDiscovery(a.GetPath()):
		return authorizer.DecisionAllow, "", nil
	case slices.Contains(groups, GroupViewers) && !a.IsResourceRequest() && a.GetVerb() == "get":
		return authorizer.DecisionAllow, "", nil
	case slices.Contains(groups, GroupViewers) && slices.Contains(readVerbs, a.GetVerb()) && !secretResources[a.GetResource()]:
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("the hub lets only %s and %s change objects, and %s read them", GroupMasters, GroupAdmins, GroupViewers), nil
}
