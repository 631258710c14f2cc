package hub

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The ClusterRoles of the default policy, which a policy file's bindings
// may name.
const (
	// RoleAdmin may do everything (but read credentials).
	RoleAdmin = "ferry:admin"
	// RoleViewer may get, list and watch every resource (but credentials)
	// and GET every non-resource path.
	RoleViewer = "ferry:viewer"
	// RoleEditor, bound in a namespace, may read and run Migrations,
	// Backups, Restores and Schedules there, manage its Clusters and
	// locations, write (never read) its credentials, and read its Events.
	// It may not use the hub's own storage access (the resource
	// hubstorage, pkg/hub/admission): its locations name its Credentials;
	// nor its registry credentials (hubregistry): it records images, and
	// does not copy or push them.
	RoleEditor = "ferry:editor"
)

// Policy is the hub's authorization policy in RBAC's shape: ClusterRoles
// and Roles grant rules, ClusterRoleBindings grant them in every namespace
// and RoleBindings in their own. The default policy binds GroupAdmins to
// RoleAdmin and GroupViewers to RoleViewer; a policy file
// (Options.PolicyFile) adds rbac.authorization.k8s.io/v1 objects to it.
type Policy struct {
	clusterRoles    map[string][]rbacv1.PolicyRule
	roles           map[string][]rbacv1.PolicyRule // namespace/name
	clusterBindings []rbacv1.ClusterRoleBinding
	bindings        map[string][]rbacv1.RoleBinding // by namespace
}

var ferryGroup = []string{"ferry.dev"}

// DefaultPolicy is the policy without a file.
func DefaultPolicy() *Policy {
	read := []string{"get", "list", "watch"}
	p := &Policy{
		clusterRoles: map[string][]rbacv1.PolicyRule{
			RoleAdmin: {{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
				{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}}},
			RoleViewer: {{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: read},
				{NonResourceURLs: []string{"*"}, Verbs: []string{"get"}}},
			RoleEditor: {
				{APIGroups: ferryGroup, Resources: []string{"migrations", "migrations/report", "backups", "restores", "schedules", "clusters", "backupstoragelocations"}, Verbs: []string{"*"}},
				{APIGroups: ferryGroup, Resources: []string{"clustercredentials", "credentials"}, Verbs: []string{"create", "update", "delete"}},
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: read},
			},
		},
		roles:    map[string][]rbacv1.PolicyRule{},
		bindings: map[string][]rbacv1.RoleBinding{},
	}
	for group, role := range map[string]string{GroupAdmins: RoleAdmin, GroupViewers: RoleViewer} {
		p.clusterBindings = append(p.clusterBindings, rbacv1.ClusterRoleBinding{
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: group}},
			RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: role}})
	}
	return p
}

// LoadPolicy is the default policy with the ClusterRoles, Roles,
// ClusterRoleBindings and RoleBindings of file (YAML, several documents)
// added. Errors name the file and the object.
func LoadPolicy(file string) (*Policy, error) {
	p := DefaultPolicy()
	if file == "" {
		return p, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("authorization policy: %w", err)
	}
	if err := p.add(data); err != nil {
		return nil, fmt.Errorf("authorization policy %s: %w", file, err)
	}
	return p, nil
}

var rbacCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	if err := rbacv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()

// add decodes the RBAC objects of data into p, then checks every binding
// names a role that exists and subjects ferry can tell.
func (p *Policy) add(data []byte) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if onlyComments(doc) {
			continue
		}
		obj, _, err := rbacCodecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			if _, ok := p.clusterRoles[o.Name]; ok {
				return fmt.Errorf("document %d: ClusterRole %q is defined already (the default policy's roles cannot be redefined)", i, o.Name)
			}
			p.clusterRoles[o.Name] = o.Rules
		case *rbacv1.Role:
			if o.Namespace == "" {
				return fmt.Errorf("document %d: Role %s: metadata.namespace is required", i, o.Name)
			}
			if _, ok := p.roles[o.Namespace+"/"+o.Name]; ok {
				return fmt.Errorf("document %d: Role %s/%s is defined twice", i, o.Namespace, o.Name)
			}
			p.roles[o.Namespace+"/"+o.Name] = o.Rules
		case *rbacv1.ClusterRoleBinding:
			p.clusterBindings = append(p.clusterBindings, *o)
		case *rbacv1.RoleBinding:
			p.bindings[o.Namespace] = append(p.bindings[o.Namespace], *o)
		default:
			return fmt.Errorf("document %d: a %s; want a ClusterRole, Role, ClusterRoleBinding or RoleBinding", i, obj.GetObjectKind().GroupVersionKind().Kind)
		}
	}
	return p.check()
}

// onlyComments says whether a YAML document holds nothing but comments
// and blank lines (a header, or what follows a trailing "---").
func onlyComments(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

func (p *Policy) check() error {
	for _, b := range p.clusterBindings {
		if err := p.checkBinding("ClusterRoleBinding "+b.Name, "", b.RoleRef, b.Subjects); err != nil {
			return err
		}
	}
	for ns, bs := range p.bindings {
		for _, b := range bs {
			if ns == "" {
				return fmt.Errorf("RoleBinding %s: metadata.namespace is required", b.Name)
			}
			if err := p.checkBinding("RoleBinding "+ns+"/"+b.Name, ns, b.RoleRef, b.Subjects); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *Policy) checkBinding(what, ns string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) error {
	if _, ok := p.rules(ns, ref); !ok {
		return fmt.Errorf("%s: roleRef names %s %q, which the policy does not hold", what, ref.Kind, ref.Name)
	}
	for i, s := range subjects {
		if s.Kind != rbacv1.UserKind && s.Kind != rbacv1.GroupKind {
			return fmt.Errorf("%s: subjects[%d] is a %s; the hub's subjects are Users and Groups", what, i, s.Kind)
		}
	}
	return nil
}

// rules are the rules of the role ref names, from a binding in ns ("":
// a ClusterRoleBinding).
func (p *Policy) rules(ns string, ref rbacv1.RoleRef) ([]rbacv1.PolicyRule, bool) {
	switch {
	case ref.Kind == "ClusterRole":
		r, ok := p.clusterRoles[ref.Name]
		return r, ok
	case ref.Kind == "Role" && ns != "":
		r, ok := p.roles[ns+"/"+ref.Name]
		return r, ok
	}
	return nil, false
}

// Allows says whether u may do a: a rule of a role bound to u by a
// ClusterRoleBinding, or by a RoleBinding in a's namespace, allows it.
func (p *Policy) Allows(u user.Info, a authorizer.Attributes) bool {
	for _, b := range p.clusterBindings {
		if bound(u, b.Subjects) && anyAllows(p.clusterRoles[b.RoleRef.Name], a) {
			return true
		}
	}
	if ns := a.GetNamespace(); ns != "" && a.IsResourceRequest() {
		for _, b := range p.bindings[ns] {
			if rules, _ := p.rules(ns, b.RoleRef); bound(u, b.Subjects) && anyAllows(rules, a) {
				return true
			}
		}
	}
	return false
}

func bound(u user.Info, subjects []rbacv1.Subject) bool {
	for _, s := range subjects {
		if s.Kind == rbacv1.UserKind && s.Name == u.GetName() || s.Kind == rbacv1.GroupKind && slices.Contains(u.GetGroups(), s.Name) {
			return true
		}
	}
	return false
}

func anyAllows(rules []rbacv1.PolicyRule, a authorizer.Attributes) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return ruleAllows(r, a) })
}

// ruleAllows is RBAC's rule match: verbs, then API groups, resources
// ("resource/subresource", "*/subresource", "*") and resource names for
// a resource request; non-resource URLs (a trailing "*" is a prefix) for
// the others.
func ruleAllows(r rbacv1.PolicyRule, a authorizer.Attributes) bool {
	if !has(r.Verbs, a.GetVerb()) {
		return false
	}
	if !a.IsResourceRequest() {
		return slices.ContainsFunc(r.NonResourceURLs, func(u string) bool {
			return u == "*" || u == a.GetPath() || strings.HasSuffix(u, "*") && strings.HasPrefix(a.GetPath(), strings.TrimSuffix(u, "*"))
		})
	}
	if !has(r.APIGroups, a.GetAPIGroup()) {
		return false
	}
	res := a.GetResource()
	if sub := a.GetSubresource(); sub != "" {
		res += "/" + sub
		if !slices.Contains(r.Resources, "*") && !slices.Contains(r.Resources, res) && !slices.Contains(r.Resources, "*/"+sub) {
			return false
		}
	} else if !has(r.Resources, res) {
		return false
	}
	return len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, a.GetName())
}

func has(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
