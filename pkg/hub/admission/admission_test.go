package admission

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
)

// getter is a storage that holds names, counting its lookups.
type getter struct {
	names   []string
	lookups int
}

func (g *getter) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	g.lookups++
	if slices.Contains(g.names, name) {
		return &ferry.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
	}
	return nil, apierrors.NewNotFound(ferry.Resource("clusters"), name)
}

// cached is an informer, never run, whose cache holds names in ns.
func cached(t *testing.T, ns string, names ...string) cache.SharedIndexInformer {
	i := cache.NewSharedIndexInformer(&cache.ListWatch{}, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	for _, n := range names {
		if err := i.GetIndexer().Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	return i
}

// allow lets users named in it use hubstorage.
type allow []string

func (a allow) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetVerb() == "use" && (attrs.GetResource() == HubStorage || attrs.GetResource() == HubRegistry) && slices.Contains(a, attrs.GetUser().GetName()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func migration(source, target, location string, credentials bool, images ...string) *ferry.Migration {
	m := &ferry.Migration{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "m"}}
	m.Spec.Source.Cluster, m.Spec.Target.Cluster, m.Spec.Storage.Location = source, target, location
	if credentials {
		m.Spec.Storage.CredentialRef = &ferry.LocalObjectReference{Name: "keys"}
	}
	if len(images) > 0 {
		m.Spec.Images.Mode = images[0]
	}
	return m
}

// TestPlugin: names are found in the cache, then in storage (an object
// created a moment ago), and a name in neither is NotFound at its field;
// the hub's own storage access needs "use" of hubstorage.
func TestPlugin(t *testing.T) {
	clusters := &getter{names: []string{"old", "fresh"}}
	p := New(authorizer.AuthorizerFunc(allow{"admin"}.Authorize))
	p.SetStorage(Storage{Clusters: clusters, Locations: &getter{}, Backups: &getter{}})
	p.SetInformers(Informers{Clusters: cached(t, "team", "old"), Locations: cached(t, "team"), Backups: cached(t, "team")})
	p.SetReadyFunc(func() bool { return true })
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	validate := func(m *ferry.Migration, who string) error {
		ctx := genericapirequest.WithNamespace(context.Background(), "team")
		a := admission.NewAttributesRecord(m, nil, ferry.Kind("Migration").WithVersion(""), "team", m.Name, ferry.Resource("migrations").WithVersion(""),
			"", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: who})
		return p.Validate(ctx, a, nil)
	}
	if err := validate(migration("old", "fresh", "s3://b?region=x", true), "alice"); err != nil {
		t.Errorf("Clusters in the cache and in storage: %v", err)
	}
	if clusters.lookups != 1 {
		t.Errorf("storage lookups: %d, want 1 (fresh, not in the cache)", clusters.lookups)
	}
	err := validate(migration("old", "gone", "s3://b?region=x", true), "alice")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `spec.target.cluster: Not found: "gone"`) {
		t.Errorf("a Cluster that does not exist: %v, want NotFound at spec.target.cluster", err)
	}
	for _, c := range []struct {
		location    string
		credentials bool
		who, field  string
	}{
		{"file:///var/lib/ferry", false, "alice", "spec.storage.location"},
		{"mem://", false, "alice", "spec.storage.location"},
		{"s3://b?region=x&profile=ops", true, "alice", "spec.storage.location"},
		{"s3://b?region=x", false, "alice", "spec.storage.credentialRef"},
		{"gs://b", false, "alice", "spec.storage.credentialRef"},
		{"file:///var/lib/ferry", false, "admin", ""},
		{"s3://b?region=x", false, "admin", ""},
	} {
		err := validate(migration("old", "fresh", c.location, c.credentials), c.who)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s by %s: %v, want accepted", c.location, c.who, err)
		case c.field != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.field+": Forbidden")):
			t.Errorf("%s by %s: %v, want Forbidden at %s", c.location, c.who, err, c.field)
		}
	}
}

// TestPluginImages: copying images (mode copy or bundle) pulls and pushes
// them with the hub's registry credentials: only a user allowed to use
// hubregistry may ask for it; record and none may anyone.
func TestPluginImages(t *testing.T) {
	p := New(authorizer.AuthorizerFunc(allow{"admin"}.Authorize))
	p.SetStorage(Storage{Clusters: &getter{names: []string{"old", "new"}}, Locations: &getter{}, Backups: &getter{}})
	p.SetInformers(Informers{Clusters: cached(t, "team"), Locations: cached(t, "team"), Backups: cached(t, "team")})
	p.SetReadyFunc(func() bool { return true })
	for _, c := range []struct{ mode, who string }{{"copy", "alice"}, {"bundle", "alice"}, {"record", "alice"}, {"", "alice"}, {"copy", "admin"}} {
		m := migration("old", "new", "s3://b?region=x", true, c.mode)
		ctx := genericapirequest.WithNamespace(context.Background(), "team")
		a := admission.NewAttributesRecord(m, nil, ferry.Kind("Migration").WithVersion(""), "team", m.Name, ferry.Resource("migrations").WithVersion(""),
			"", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: c.who})
		err := p.Validate(ctx, a, nil)
		refuse := c.who == "alice" && (c.mode == "copy" || c.mode == "bundle")
		switch {
		case refuse && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.images.mode: Forbidden") || !strings.Contains(err.Error(), HubRegistry)):
			t.Errorf("mode %s by %s: %v, want Forbidden at spec.images.mode naming %s", c.mode, c.who, err, HubRegistry)
		case !refuse && err != nil:
			t.Errorf("mode %q by %s: %v, want accepted", c.mode, c.who, err)
		}
	}
}
