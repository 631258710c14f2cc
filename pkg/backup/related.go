package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeferry/ferry/pkg/filter"
	"github.com/kubeferry/ferry/pkg/kube"
)

// The follow-on references (docs/design.md#related-objects) are the
// cluster-scoped objects that point at included objects rather than the
// other way round, so they are found by listing them, once each, after the
// namespaced objects are listed: ClusterRoleBindings of included
// ServiceAccounts, webhook configurations and APIServices served by
// included Services, CRDs (of included custom resources, converted by an
// included Service, or whose resources an included webhook admits), and
// ClusterRoles (bound, granting only on included CRDs, or aggregated into
// another included ClusterRole, transitively).

var (
	grCRB        = schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}
	grMutating   = schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}
	grValidating = schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}
	grAPIService = schema.GroupResource{Group: "apiregistration.k8s.io", Resource: "apiservices"}
)

// follow is one backup's search for related cluster-scoped objects.
type follow struct {
	r    *run
	apis *kube.APIs
	res  *filter.Resources

	mu sync.Mutex
	// admits are the rules of the included webhooks, by the webhook
	// configuration they are in ("validatingwebhookconfiguration NAME").
	admits map[string][]admissionv1.Rule
	// roles are every ClusterRole of the cluster, kept by keepRole.
	roles []clusterRole
}

// clusterRole is one listed ClusterRole: what the follow-on needs of it,
// and its bytes for the archive.
type clusterRole struct {
	rbacv1.ClusterRole
	data []byte
}

// writeRelated writes the objects the included namespaced objects name and
// the follow-on references, each LIST once and all of them concurrently
// but for two waits: the CRDs are decided after the webhooks (whose rules
// they are matched against), and the ClusterRoles after everything (they
// depend on the bindings, the CRDs and one another). Every object written
// gets a backup result with its reasons.
func (r *run) writeRelated(ctx context.Context, apis *kube.APIs, res *filter.Resources) error {
	f := &follow{r: r, apis: apis, res: res, admits: map[string][]admissionv1.Rule{}}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); errs[0] = f.getNamed(ctx) }()
	go func() { defer wg.Done(); errs[1] = r.listAll(ctx, f.bindingsAndRoles()) }()
	go func() {
		defer wg.Done()
		if errs[2] = r.listAll(ctx, f.webhooks()); errs[2] == nil {
			errs[2] = r.listAll(ctx, f.crds())
		}
	}()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := f.writeClusterRoles(); err != nil {
		return err
	}
	for _, res := range r.refs.results() {
		r.results.Add(res)
	}
	return nil
}

// resourceFor returns the resource gr is written at, its preferred version
// (or its first served one); false when the cluster does not serve it or
// the resource filter leaves it out.
func (f *follow) resourceFor(gr schema.GroupResource) (kube.Resource, bool) {
	versions := f.apis.Versions(gr.Group, gr.Resource)
	if len(versions) == 0 {
		return kube.Resource{}, false
	}
	kr, ok := f.apis.Lookup(gr.WithVersion(f.apis.Preferred[gr.Group]))
	if !ok {
		kr, _ = f.apis.Lookup(gr.WithVersion(versions[0]))
	}
	return kr, kr.Has("list") && kr.Has("get") && f.res.Match(kr.Group, kr.GroupVersionResource.Resource, kr.Kind)
}

// task returns the LIST of gr's objects whose items go through pick;
// none when gr is not served or not selected.
func (f *follow) task(gr schema.GroupResource, pick func(kube.Resource, []byte) (bool, error)) []task {
	kr, ok := f.resourceFor(gr)
	if !ok {
		return nil
	}
	return []task{{res: kr, pick: func(data []byte) (bool, error) { return pick(kr, data) }}}
}

// getNamed GETs the objects the namespaced objects name, PVs first so
// that their StorageClasses are known too. Objects that are gone are
// warned about and skipped.
func (f *follow) getNamed(ctx context.Context) error {
	if err := f.getAll(ctx, grPV, grPriority, grRuntime, grIngressClass); err != nil {
		return err
	}
	return f.getAll(ctx, grStorageClass)
}

// getAll GETs every recorded object of grs, on opts.Workers goroutines.
func (f *follow) getAll(ctx context.Context, grs ...schema.GroupResource) error {
	type job struct {
		kr   kube.Resource
		name string
	}
	var jobs []job
	for _, gr := range grs {
		if kr, ok := f.resourceFor(gr); ok {
			for _, n := range f.r.refs.names(gr) {
				jobs = append(jobs, job{kr, n})
			}
		}
	}
	ch := make(chan job)
	errs := make([]error, f.r.opts.Workers)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				if errs[i] == nil {
					errs[i] = f.get(ctx, j.kr, j.name)
				}
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return errors.Join(errs...)
}

// get GETs and writes one named object.
func (f *follow) get(ctx context.Context, kr kube.Resource, name string) error {
	u, err := f.r.cluster.Dynamic.Resource(kr.GroupVersionResource).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		f.r.results.Warnf("%s %s is referenced by a backed-up object but does not exist", kr.GroupResource(), name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting %s %s: %w", kr.GroupResource(), name, err)
	}
	gr := kr.GroupVersionResource.GroupResource()
	if gr == grPV {
		sc, _, _ := unstructured.NestedString(u.Object, "spec", "storageClassName")
		f.r.refs.add(grStorageClass, sc, "storage class of persistentvolume "+name)
	}
	f.r.total.Add(1)
	f.r.refs.written(gr, name, kr.Version)
	return f.r.writeObject(kr, u)
}

// bindingsAndRoles returns the LISTs of ClusterRoleBindings (of included
// ServiceAccounts) and of every ClusterRole, kept for writeClusterRoles.
func (f *follow) bindingsAndRoles() []task {
	var tasks []task
	if len(f.r.refs.serviceAccounts) > 0 {
		tasks = f.task(grCRB, f.pickBinding)
	}
	return append(tasks, f.task(grClusterRole, f.keepRole)...)
}

// webhooks returns the LISTs of webhook configurations and APIServices,
// which included Services may serve.
func (f *follow) webhooks() []task {
	if len(f.r.refs.services) == 0 {
		return nil
	}
	tasks := append(f.task(grMutating, f.pickWebhooks), f.task(grValidating, f.pickWebhooks)...)
	return append(tasks, f.task(grAPIService, f.pickAPIService)...)
}

// bring records why kr's object name is brought, and reports whether it
// is: when there is a reason.
func (f *follow) bring(kr kube.Resource, name string, reasons []string) bool {
	gr := kr.GroupVersionResource.GroupResource()
	for _, why := range reasons {
		f.r.refs.add(gr, name, why)
	}
	if len(reasons) == 0 {
		return false
	}
	f.r.refs.written(gr, name, kr.Version)
	return true
}

func (f *follow) pickBinding(kr kube.Resource, data []byte) (bool, error) {
	var b rbacv1.ClusterRoleBinding
	if err := json.Unmarshal(data, &b); err != nil {
		return false, fmt.Errorf("decoding %s item: %w", kr.GroupResource(), err)
	}
	if !f.bring(kr, b.Name, bindingReasons(&b, f.r.refs.includedSA)) {
		return false, nil
	}
	if b.RoleRef.Kind == "ClusterRole" {
		f.r.refs.add(grClusterRole, b.RoleRef.Name, "granted by clusterrolebinding "+b.Name)
	}
	return true, nil
}

func (f *follow) pickWebhooks(kr kube.Resource, data []byte) (bool, error) {
	var cfg struct {
		metav1.ObjectMeta `json:"metadata"`
		Webhooks          []webhook `json:"webhooks"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return false, fmt.Errorf("decoding %s item: %w", kr.GroupResource(), err)
	}
	reasons, rules := includedWebhooks(cfg.Webhooks, f.r.refs.includedService)
	if !f.bring(kr, cfg.Name, reasons) {
		return false, nil
	}
	f.mu.Lock()
	f.admits[strings.ToLower(kr.Kind)+" "+cfg.Name] = rules
	f.mu.Unlock()
	return true, nil
}

func (f *follow) pickAPIService(kr kube.Resource, data []byte) (bool, error) {
	var s struct {
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			Service *admissionv1.ServiceReference `json:"service"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return false, fmt.Errorf("decoding %s item: %w", kr.GroupResource(), err)
	}
	var reasons []string
	if svc := s.Spec.Service; svc != nil && f.r.refs.includedService(svc.Namespace, svc.Name) {
		reasons = append(reasons, "served by service "+svc.Namespace+"/"+svc.Name)
	}
	return f.bring(kr, s.Name, reasons), nil
}

// crds returns the LIST of CRDs, when any can be related.
func (f *follow) crds() []task {
	refs := f.r.refs
	if len(refs.names(grCRD)) == 0 && len(refs.services) == 0 && len(f.admits) == 0 {
		return nil
	}
	return f.task(grCRD, f.pickCRD)
}

func (f *follow) pickCRD(kr kube.Resource, data []byte) (bool, error) {
	var c crd
	if err := json.Unmarshal(data, &c); err != nil {
		return false, fmt.Errorf("decoding %s item: %w", kr.GroupResource(), err)
	}
	for _, why := range crdReasons(&c, f.r.refs.includedService, f.admits) {
		f.r.refs.add(grCRD, c.Name, why)
	}
	if !f.r.refs.has(grCRD, c.Name) {
		return false, nil
	}
	f.r.refs.written(grCRD, c.Name, kr.Version)
	return true, nil
}

// keepRole keeps a listed ClusterRole (in f.roles), not written until
// every ClusterRole that is related is known.
func (f *follow) keepRole(kr kube.Resource, data []byte) (bool, error) {
	var cr clusterRole
	if err := json.Unmarshal(data, &cr.ClusterRole); err != nil {
		return false, fmt.Errorf("decoding %s item: %w", kr.GroupResource(), err)
	}
	cr.data = data
	f.mu.Lock()
	f.roles = append(f.roles, cr)
	f.mu.Unlock()
	return false, nil
}

// includedCRDs returns the plurals of the CRDs written, by group.
func (f *follow) includedCRDs() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, name := range f.r.refs.writtenNames(grCRD) {
		if plural, group, ok := strings.Cut(name, "."); ok {
			if out[group] == nil {
				out[group] = map[string]bool{}
			}
			out[group][plural] = true
		}
	}
	return out
}

// writeClusterRoles adds the ClusterRoles that grant only on included
// CRDs and those aggregated into included ones, then writes every
// recorded ClusterRole; a bound one that does not exist is warned about.
func (f *follow) writeClusterRoles() error {
	kr, ok := f.resourceFor(grClusterRole)
	if !ok || f.roles == nil { // not selected, or its LIST failed (an item result says so)
		return nil
	}
	refs := f.r.refs
	crds := f.includedCRDs()
	for _, cr := range f.roles {
		if groups := onlyOnCRDs(cr.Rules, crds); len(groups) > 0 {
			refs.add(grClusterRole, cr.Name, "grants only on included CRDs of "+strings.Join(groups, ", "))
		}
	}
	for name, why := range aggregated(f.roles, refs.names(grClusterRole)) {
		for _, w := range why {
			refs.add(grClusterRole, name, w)
		}
	}
	byName := map[string]*clusterRole{}
	for i := range f.roles {
		byName[f.roles[i].Name] = &f.roles[i]
	}
	for _, name := range refs.names(grClusterRole) {
		cr := byName[name]
		if cr == nil {
			f.r.results.Warnf("%s %s is referenced by a backed-up object but does not exist", kr.GroupResource(), name)
			continue
		}
		f.r.total.Add(1)
		refs.written(grClusterRole, name, kr.Version)
		if err := f.r.writeItem(kr, "", name, cr.data); err != nil {
			return err
		}
	}
	return nil
}

// bindingReasons returns why a ClusterRoleBinding is brought: one reason
// per included ServiceAccount among its subjects, named as a
// ServiceAccount, as its user (system:serviceaccount:NS:NAME) or by the
// group of its namespace's ServiceAccounts (system:serviceaccounts:NS).
// includedSA with name "" asks for any ServiceAccount of the namespace.
func bindingReasons(b *rbacv1.ClusterRoleBinding, includedSA func(namespace, name string) bool) []string {
	var out []string
	for _, s := range b.Subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if includedSA(s.Namespace, s.Name) {
				out = append(out, "bound to serviceaccount "+s.Namespace+"/"+s.Name)
			}
		case rbacv1.UserKind:
			rest, ok := strings.CutPrefix(s.Name, saUserPrefix)
			ns, name, ok2 := strings.Cut(rest, ":")
			if ok && ok2 && includedSA(ns, name) {
				out = append(out, "bound to serviceaccount "+ns+"/"+name+" (as user "+s.Name+")")
			}
		case rbacv1.GroupKind:
			if ns, ok := strings.CutPrefix(s.Name, saGroupPrefix); ok && ns != "" && includedSA(ns, "") {
				out = append(out, "bound to the serviceaccounts of namespace "+ns+" (group "+s.Name+")")
			}
		}
	}
	return out
}

// saUserPrefix and saGroupPrefix are how the API server names a
// ServiceAccount as a user and a namespace's ServiceAccounts as a group
// (k8s.io/apiserver/pkg/authentication/serviceaccount).
const (
	saUserPrefix  = "system:serviceaccount:"
	saGroupPrefix = "system:serviceaccounts:"
)

// webhook is what the follow-on reads of one admission webhook (mutating
// and validating ones alike).
type webhook struct {
	ClientConfig admissionv1.WebhookClientConfig  `json:"clientConfig"`
	Rules        []admissionv1.RuleWithOperations `json:"rules"`
}

// includedWebhooks returns why a webhook configuration is brought (one
// reason per included Service its webhooks call) and the rules of those
// webhooks.
func includedWebhooks(hooks []webhook, includedService func(namespace, name string) bool) ([]string, []admissionv1.Rule) {
	var reasons []string
	var rules []admissionv1.Rule
	seen := map[string]bool{}
	for _, h := range hooks {
		svc := h.ClientConfig.Service
		if svc == nil || !includedService(svc.Namespace, svc.Name) {
			continue
		}
		if id := svc.Namespace + "/" + svc.Name; !seen[id] {
			seen[id] = true
			reasons = append(reasons, "webhook service "+id)
		}
		for _, r := range h.Rules {
			rules = append(rules, r.Rule)
		}
	}
	return reasons, rules
}

// crd is what the follow-on reads of a CustomResourceDefinition.
type crd struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Group string `json:"group"`
		Names struct {
			Plural string `json:"plural"`
		} `json:"names"`
		Conversion *struct {
			Webhook *struct {
				ClientConfig *struct {
					Service *admissionv1.ServiceReference `json:"service"`
				} `json:"clientConfig"`
			} `json:"webhook"`
		} `json:"conversion"`
	} `json:"spec"`
}

// crdReasons returns why a CRD is brought besides its custom resources:
// its conversion webhook is an included Service, or an included admission
// webhook (admits: rules by webhook configuration) admits its resources.
func crdReasons(c *crd, includedService func(namespace, name string) bool, admits map[string][]admissionv1.Rule) []string {
	var out []string
	if conv := c.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
		if svc := conv.Webhook.ClientConfig.Service; svc != nil && includedService(svc.Namespace, svc.Name) {
			out = append(out, "conversion webhook service "+svc.Namespace+"/"+svc.Name)
		}
	}
	for cfg, rules := range admits {
		for _, r := range rules {
			if ruleCovers(r, c.Spec.Group, c.Spec.Names.Plural) {
				out = append(out, "resources admitted by "+cfg)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// ruleCovers reports whether an admission rule names group explicitly and
// covers its resource plural ("*", "*/*", "plural", "plural/sub"). A rule
// for every group ("*") relates the webhook to no CRD in particular.
func ruleCovers(r admissionv1.Rule, group, plural string) bool {
	if group == "" || !slices.Contains(r.APIGroups, group) {
		return false
	}
	for _, res := range r.Resources {
		name, _, _ := strings.Cut(res, "/")
		if name == "*" || name == plural {
			return true
		}
	}
	return false
}

// onlyOnCRDs returns the groups of a ClusterRole's rules when every rule
// names only API groups of included CRDs (crds: plurals by group) and only
// their resources, or "*" of such a group; nil when a rule names another
// group or resource, no group, or non-resource URLs, or there are no rules.
func onlyOnCRDs(rules []rbacv1.PolicyRule, crds map[string]map[string]bool) []string {
	if len(rules) == 0 || len(crds) == 0 {
		return nil
	}
	groups := map[string]bool{}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 || len(r.APIGroups) == 0 || len(r.Resources) == 0 {
			return nil
		}
		for _, g := range r.APIGroups {
			plurals := crds[g]
			if plurals == nil {
				return nil
			}
			for _, res := range r.Resources {
				name, _, _ := strings.Cut(res, "/")
				if name != "*" && !plurals[name] {
					return nil
				}
			}
			groups[g] = true
		}
	}
	out := make([]string, 0, len(groups))
	for g := range groups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// bootstrapLabel marks the ClusterRoles every API server makes for itself
// (kube-apiserver's RBAC bootstrap policy) with bootstrapDefaults.
const (
	bootstrapLabel    = "kubernetes.io/bootstrapping"
	bootstrapDefaults = "rbac-defaults"
)

// aggregated returns the ClusterRoles aggregated into the included ones
// (names), transitively, each with the reasons: "aggregated into
// clusterrole X" for every included X whose aggregationRule selects it.
// The aggregation rules of built-in roles are not followed.
func aggregated(roles []clusterRole, names []string) map[string][]string {
	byName := map[string]*clusterRole{}
	for i := range roles {
		byName[roles[i].Name] = &roles[i]
	}
	included := map[string]bool{}
	for _, n := range names {
		included[n] = true
	}
	out := map[string][]string{}
	queue := append([]string(nil), names...)
	for len(queue) > 0 {
		x := byName[queue[0]]
		queue = queue[1:]
		if x == nil || x.AggregationRule == nil || x.Labels[bootstrapLabel] == bootstrapDefaults {
			// A built-in role (admin, edit, view) is the target's own: its
			// aggregation controller fills it from what the target has, and
			// following it would bring every application's roles.
			continue
		}
		for _, sel := range x.AggregationRule.ClusterRoleSelectors {
			s, err := metav1.LabelSelectorAsSelector(&sel)
			if err != nil {
				continue // the aggregation controller skips it too
			}
			for i := range roles {
				y := &roles[i]
				if y.Name == x.Name || !s.Matches(labels.Set(y.Labels)) {
					continue
				}
				why := "aggregated into clusterrole " + x.Name
				if !slices.Contains(out[y.Name], why) {
					out[y.Name] = append(out[y.Name], why)
				}
				if !included[y.Name] {
					included[y.Name] = true
					queue = append(queue, y.Name)
				}
			}
		}
	}
	return out
}
