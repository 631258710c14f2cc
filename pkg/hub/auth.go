package hub

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/rest"
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
	// Every user is also in system:authenticated, as in kube-apiserver,
	// so that a policy may bind a role to all of them.
	return group.NewAuthenticatedGroupAdder(union.New(auths...)), nil
}

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

// secretResources are the kinds that hold secrets.
var secretResources = map[string]bool{"clustercredentials": true, "credentials": true}

// secretReadVerbs are the verbs that answer with a stored secret: get,
// list and watch, and patch and deletecollection, whose answers hold the
// objects as stored. create and update (a PUT replaces the whole object)
// answer with what was sent, and delete with a Status.
var secretReadVerbs = []string{"get", "list", "watch", "patch", "deletecollection"}

// hubAuthorizer is the hub's authorizer (docs/design.md#the-hub):
//   - the hub's own loopback user (its controllers) may do everything;
//   - nobody else may read ClusterCredentials or Credentials
//     (secretReadVerbs), whatever the policy says;
//   - any authenticated user may GET the health paths, /version,
//     discovery and OpenAPI (kube-apiserver's system:discovery);
//   - GroupMasters may do everything else;
//   - the rest is what the Policy grants (RBAC's shape, per namespace).
type hubAuthorizer struct {
	policy      *Policy
	loopbackUID string
}

func (h *hubAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	switch {
	case u == nil:
		return authorizer.DecisionDeny, "no user", nil
	case u.GetName() == user.APIServerUser && h.loopbackUID != "" && u.GetUID() == h.loopbackUID:
		return authorizer.DecisionAllow, "", nil
	case a.IsResourceRequest() && a.GetAPIGroup() == "ferry.dev" && secretResources[a.GetResource()] && a.GetSubresource() == "" && slices.Contains(secretReadVerbs, a.GetVerb()):
		return authorizer.DecisionDeny, fmt.Sprintf("%s are read only by the hub's controllers: create, update (a whole new object) or delete them", a.GetResource()), nil
	case !a.IsResourceRequest() && a.GetVerb() == "get" && isDiscovery(a.GetPath()):
		return authorizer.DecisionAllow, "", nil
	case slices.Contains(u.GetGroups(), GroupMasters):
		return authorizer.DecisionAllow, "", nil
	case h.policy.Allows(u, a):
		return authorizer.DecisionAllow, "", nil
	}
	where := "in every namespace"
	if ns := a.GetNamespace(); ns != "" {
		where = "in namespace " + ns
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("the hub's policy grants user %q (groups %v) no role that allows it %s", u.GetName(), u.GetGroups(), where), nil
}

// authorizeLoopback is genericapiserver.AuthorizeClientBearerToken with
// the loopback user's UID kept, so that the authorizer tells the hub's
// own controllers from any other member of GroupMasters.
func authorizeLoopback(loopback *rest.Config, authn *genericapiserver.AuthenticationInfo, authz *hubAuthorizer) {
	authz.loopbackUID = uuid.New().String()
	tokens := map[string]*user.DefaultInfo{loopback.BearerToken: {
		Name: user.APIServerUser, UID: authz.loopbackUID, Groups: []string{user.AllAuthenticated, user.SystemPrivilegedGroup},
	}}
	authn.Authenticator = union.New(authenticatorfactory.NewFromTokens(tokens, authn.APIAudiences), authn.Authenticator)
}
