package restore

import (
	"testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/archive"
)

func item(group, resource, ns, name, data string) archive.Item {
	return archive.Item{Entry: archive.Entry{Group: group, Resource: resource, Version: "v1", Namespace: ns, Name: name}, Data: []byte(data)}
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
