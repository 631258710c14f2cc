package restore

import (
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
)

func item(group, resource, ns, name, data string) archive.Item {
	return archive.NewItem(archive.Entry{Group: group, Resource: resource, Version: "v1", Namespace: ns, Name: name}, []byte(data))
}

func TestPlanSkips(t *testing.T) {
	items := []archive.Item{
		item("networking.k8s.io", "ipaddresses", "", "10.0.0.7", `{"kind":"IPAddress","metadata":{"name":"10.0.0.7"}}`),
		item("", "configmaps", "a", "kube-root-ca.crt", `{"kind":"ConfigMap","metadata":{"name":"kube-root-ca.crt"}}`),
		item("", "services", "a", "web", `{"kind":"Service","metadata":{"name":"web","uid":"s1"},"spec":{"selector":{"app":"web"}}}`),
		item("", "endpoints", "a", "web", `{"kind":"Endpoints","metadata":{"name":"web"}}`),
		item("apps", "deployments", "a", "d", `{"kind":"Deployment","metadata":{"name":"d","uid":"d1"}}`),
		item("apps", "replicasets", "a", "d-1", `{"kind":"ReplicaSet","metadata":{"name":"d-1","uid":"r1","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"d","uid":"d1","controller":true}]}}`),
		item("", "pods", "a", "d-1-x", `{"kind":"Pod","metadata":{"name":"d-1-x","uid":"p1","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"d-1","uid":"r1","controller":true}]}}`),
		item("", "pods", "a", "solo", `{"kind":"Pod","metadata":{"name":"solo","uid":"p2"}}`),
		item("", "configmaps", "a", "web-config", `{"kind":"ConfigMap","metadata":{"name":"web-config","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"d","uid":"d1","controller":true}]}}`),
		item("", "persistentvolumes", "", "dyn", `{"kind":"PersistentVolume","metadata":{"name":"dyn","annotations":{"pv.kubernetes.io/provisioned-by":"ebs.csi.aws.com"}}}`),
		item("", "persistentvolumes", "", "static", `{"kind":"PersistentVolume","metadata":{"name":"static"},"spec":{"claimRef":{"namespace":"a","name":"c"}}}`),
	}
	o := &Options{Name: "r", Spec: v1alpha1.RestoreSpec{BackupName: "b", NamespaceMapping: map[string]string{"a": "b"}}}
	p, err := buildPlan(items, o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{ // applied?
		"10.0.0.7": false, "kube-root-ca.crt": false, "web/services": true, "web/endpoints": false,
		"d": true, "d-1": false, "d-1-x": false, "solo": true, "dyn": false, "static": true,
		"web-config": true, // owned by a Deployment, but no controller recreates it
	}
	for _, it := range p.Items {
		key := it.Name
		if it.Name == "web" {
			key = "web/" + it.Resource
		}
		if applied := it.Skip == ""; applied != want[key] {
			t.Errorf("%s: applied = %v (skip %q), want %v", key, applied, it.Skip, want[key])
		}
	}
	if p.PVNames["static"] == "" || p.PVNames["static"] == "static" || !p.RestoredPVs["static"] || p.RestoredPVs["dyn"] {
		t.Errorf("PV plan: names %v restored %v", p.PVNames, p.RestoredPVs)
	}
	for i := 1; i < len(p.Items); i++ {
		if p.Items[i-1].Tier > p.Items[i].Tier {
			t.Fatal("plan not ordered by tier")
		}
	}
}

// TestSplitCopies: one primary copy per object, other versions kept as
// alternatives, for ferry's layout and Velero's (which also writes the
// preferred version under <v>-preferredversion).
func TestSplitCopies(t *testing.T) {
	at := func(p, version, name string) archive.Item {
		return archive.Item{Entry: archive.Entry{Path: p, Group: "music.example.io", Resource: "rockbands", Version: version, Namespace: "n", Name: name}}
	}
	items := []archive.Item{
		// ferry: preferred unversioned, another version after it
		at("resources/rockbands.music.example.io/v1alpha1/namespaces/n/f.json", "v1alpha1", "f"),
		at("resources/rockbands.music.example.io/namespaces/n/f.json", "v1", "f"),
		// Velero: the legacy copy, the preferred-version copy and another
		at("resources/rockbands.music.example.io/namespaces/n/v.json", "", "v"),
		at("resources/rockbands.music.example.io/v1-preferredversion/namespaces/n/v.json", "v1", "v"),
		at("resources/rockbands.music.example.io/v2beta1/namespaces/n/v.json", "v2beta1", "v"),
		// only non-preferred copies: the first is promoted
		at("resources/rockbands.music.example.io/v2beta2/namespaces/n/o.json", "v2beta2", "o"),
		at("resources/rockbands.music.example.io/v2beta1/namespaces/n/o.json", "v2beta1", "o"),
	}
	prim, others := splitCopies(items)
	got := map[string]string{}
	for _, p := range prim {
		if _, dup := got[p.Name]; dup {
			t.Fatalf("%s has two primary copies", p.Name)
		}
		got[p.Name] = p.Path
	}
	want := map[string]string{
		"f": "resources/rockbands.music.example.io/namespaces/n/f.json",
		"v": "resources/rockbands.music.example.io/v1-preferredversion/namespaces/n/v.json",
		"o": "resources/rockbands.music.example.io/v2beta2/namespaces/n/o.json",
	}
	if len(got) != len(want) {
		t.Fatalf("primaries %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: primary %s, want %s", k, got[k], v)
		}
	}
	for name, wantVersions := range map[string]string{"f": "v1alpha1", "v": "v2beta1", "o": "v2beta1"} {
		o := others[objectKey{"rockbands.music.example.io", "n", name}]
		var vs []string
		for _, it := range o {
			vs = append(vs, it.Version)
		}
		if strings.Join(vs, ",") != wantVersions {
			t.Errorf("%s: other versions %v, want %s", name, vs, wantVersions)
		}
	}
}

// TestPlanWarnsUnmatched: a namespace mapping or an included namespace
// that the backup does not have is a warning, not a silent no-op.
func TestPlanWarnsUnmatched(t *testing.T) {
	items := []archive.Item{
		item("", "namespaces", "", "shop", `{"kind":"Namespace","metadata":{"name":"shop"}}`),
		item("", "configmaps", "shop", "c", `{"kind":"ConfigMap","metadata":{"name":"c"}}`),
	}
	o := &Options{Name: "r", Spec: v1alpha1.RestoreSpec{BackupName: "b",
		NamespaceMapping: map[string]string{"shop": "shop2", "shp": "x"}, IncludedNamespaces: []string{"shop", "payments"}}}
	p, err := buildPlan(items, o)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(p.Warnings, "\n")
	want := `spec.namespaceMapping[shp]: "x": the backup has no namespace shp` + "\n" + `spec.includedNamespaces: "payments": the backup has no namespace payments`
	if got != want {
		t.Errorf("warnings:\n%s\nwant:\n%s", got, want)
	}
}

// ferry's own records are never restored: the target's server would run a
// restored Backup (its status dropped) as a new one, and a restored
// Schedule would back the target up under the source's names. Locations
// (and their Secrets) are restored.
func TestPlanSkipsFerryRecords(t *testing.T) {
	var items []archive.Item
	for _, r := range []string{"backups", "restores", "schedules", "podvolumebackups", "podvolumerestores", "backupstoragelocations"} {
		items = append(items, item("ferry.dev", r, "ferry", r, `{"kind":"X","metadata":{"name":"`+r+`"}}`))
	}
	p, err := buildPlan(items, &Options{Name: "r", Spec: v1alpha1.RestoreSpec{BackupName: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range p.Items {
		if skipped := it.Skip != ""; skipped != (it.Name != "backupstoragelocations") {
			t.Errorf("%s: skip %q", it.Name, it.Skip)
		}
	}
	if len(p.Items) != 6 {
		t.Errorf("%d items planned", len(p.Items))
	}
}
