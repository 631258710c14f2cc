package restore

import (
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// TestHoldWorkloads: a workload that mounts a claim whose data failed to
// arrive (through its pod template, or a StatefulSet's claim templates) is
// held back; others, and claims skipped because they hold data already,
// are not.
func TestHoldWorkloads(t *testing.T) {
	o := &Options{}
	o.Spec.NamespaceMapping = map[string]string{"src": "dst"}
	failed := func(claim, err string) volumes.PodVolumeRestore {
		return volumes.PodVolumeRestore{RestoreTarget: volumes.RestoreTarget{PodVolume: volumes.PodVolume{Namespace: "dst", ClaimName: claim}}, Error: err}
	}
	hold := holdWorkloads([]volumes.PodVolumeRestore{
		failed("web-data", "claim dst/web-data: helper pod x: cannot be scheduled"),
		failed("data-db-2", "claim dst/data-db-2: its data is not in the backup"),
		failed("old", "claim dst/old: "+volumes.ErrAlreadyRestored.Error()),
		{RestoreTarget: volumes.RestoreTarget{PodVolume: volumes.PodVolume{Namespace: "dst", ClaimName: "ok"}}},
	}, o)
	tmpl := `{"template":{"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"%s"}}]}}}`
	cases := []struct {
		gr, name, data string
		held           bool
	}{
		{"deployments.apps", "web", `{"spec":` + strings.Replace(tmpl, "%s", "web-data", 1) + `}`, true},
		{"deployments.apps", "api", `{"spec":` + strings.Replace(tmpl, "%s", "ok", 1) + `}`, false},
		{"deployments.apps", "legacy", `{"spec":` + strings.Replace(tmpl, "%s", "old", 1) + `}`, false},
		{"pods", "p", `{"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"web-data"}}]}}`, true},
		{"cronjobs.batch", "c", `{"spec":{"jobTemplate":{"spec":` + strings.Replace(tmpl, "%s", "web-data", 1) + `}}}`, true},
		{"statefulsets.apps", "db", `{"spec":{"replicas":3,"volumeClaimTemplates":[{"metadata":{"name":"data"}}]}}`, true},
		{"statefulsets.apps", "db", `{"spec":{"replicas":2,"volumeClaimTemplates":[{"metadata":{"name":"data"}}]}}`, false},
		{"configmaps", "web-data", `{"data":{}}`, false},
	}
	for _, c := range cases {
		ai := archive.NewItem(archive.Entry{Namespace: "src", Name: c.name}, []byte(c.data))
		it := &Item{GroupResource: c.gr, Item: &ai}
		why := hold(it)
		if (why != "") != c.held {
			t.Errorf("%s %s: hold %q, want held %v", c.gr, c.data, why, c.held)
		}
		if c.held && !strings.Contains(why, "dst/") {
			t.Errorf("%s: reason %q does not name the claim", c.gr, why)
		}
	}
}
