package transform

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(t *testing.T, js string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(js)); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestService(t *testing.T) {
	svc := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"lb","namespace":"a"},"spec":{"type":"LoadBalancer","clusterIP":"10.0.0.5","clusterIPs":["10.0.0.5"],
	  "externalTrafficPolicy":"Local","healthCheckNodePort":31536,"ports":[{"port":80,"nodePort":30080}]}}`
	u := obj(t, svc)
	notes := Apply(&Context{BackupName: "b", RestoreName: "r"}, "", u)
	for _, f := range [][]string{{"spec", "clusterIP"}, {"spec", "clusterIPs"}, {"spec", "healthCheckNodePort"}} {
		if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, f...); ok {
			t.Errorf("%v not cleared", f)
		}
	}
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
	if _, ok := ports[0].(map[string]any)["nodePort"]; ok {
		t.Error("nodePort not cleared")
	}
	if len(notes) < 3 {
		t.Errorf("changes not reported: %v", notes)
	}
	kept := obj(t, svc)
	Apply(&Context{PreserveNodePorts: true}, "", kept)
	if hc, _, _ := unstructured.NestedInt64(kept.Object, "spec", "healthCheckNodePort"); hc != 31536 {
		t.Errorf("--preserve-nodeports lost healthCheckNodePort: %d", hc)
	}
	headless := obj(t, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"h"},"spec":{"clusterIP":"None","clusterIPs":["None"]}}`)
	Apply(&Context{}, "", headless)
	if ip, _, _ := unstructured.NestedString(headless.Object, "spec", "clusterIP"); ip != "None" {
		t.Errorf("headless clusterIP = %q", ip)
	}
}

func TestJobAndPod(t *testing.T) {
	job := obj(t, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","labels":{"job-name":"j","app":"x"}},"spec":{"selector":{"matchLabels":{"controller-uid":"u"}},
	  "template":{"metadata":{"labels":{"controller-uid":"u","batch.kubernetes.io/controller-uid":"u","job-name":"j","app":"x"}}}}}`)
	notes := Apply(&Context{}, "batch", job)
	if _, ok, _ := unstructured.NestedFieldNoCopy(job.Object, "spec", "selector"); ok {
		t.Error("selector kept")
	}
	// Nothing is changed silently: each removal has its note.
	for _, want := range []string{"spec.selector removed", "spec.template.metadata.labels: generated labels controller-uid, batch.kubernetes.io/controller-uid, job-name removed", "metadata.labels: generated labels job-name removed"} {
		if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, want) }) {
			t.Errorf("notes %q: none says %q", notes, want)
		}
	}
	l, _, _ := unstructured.NestedStringMap(job.Object, "spec", "template", "metadata", "labels")
	if len(l) != 1 || l["app"] != "x" {
		t.Errorf("template labels = %v, want only app", l)
	}
	manual := obj(t, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"manualSelector":true,"selector":{"matchLabels":{"a":"b"}}}}`)
	Apply(&Context{}, "batch", manual)
	if _, ok, _ := unstructured.NestedFieldNoCopy(manual.Object, "spec", "selector"); !ok {
		t.Error("manualSelector Job lost its selector")
	}
	pod := obj(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"nodeName":"n1","ephemeralContainers":[{"name":"debugger"}],"volumes":[{"name":"kube-api-access-x1"},{"name":"data"}],
	  "containers":[{"name":"c","volumeMounts":[{"name":"kube-api-access-x1"},{"name":"data"}]}]}}`)
	Apply(&Context{}, "", pod)
	vols, _, _ := unstructured.NestedSlice(pod.Object, "spec", "volumes")
	cs, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	mounts := cs[0].(map[string]any)["volumeMounts"].([]any)
	if len(vols) != 1 || len(mounts) != 1 {
		t.Errorf("volumes %v mounts %v, want only data", vols, mounts)
	}
	if n, _, _ := unstructured.NestedString(pod.Object, "spec", "nodeName"); n != "" {
		t.Error("nodeName kept")
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(pod.Object, "spec", "ephemeralContainers"); ok {
		t.Error("ephemeralContainers kept: the API server refuses them on create")
	}
}

func TestVolumesAndOwners(t *testing.T) {
	c := &Context{NamespaceMapping: map[string]string{"a": "b"}, RestoredPVs: map[string]bool{"pv1": true}, PVNames: map[string]string{"pv1": "pv1-x"},
		OwnerUIDs: func(uid string) (string, bool) { return map[string]string{"old": "new"}[uid], uid == "old" }}
	pv := obj(t, `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv1","uid":"u1"},"spec":{"claimRef":{"namespace":"a","name":"c","uid":"u2","resourceVersion":"7"}}}`)
	Apply(c, "", pv)
	if pv.GetName() != "pv1-x" {
		t.Errorf("PV name %q", pv.GetName())
	}
	cr, _, _ := unstructured.NestedStringMap(pv.Object, "spec", "claimRef")
	if cr["namespace"] != "b" || cr["uid"] != "" || cr["resourceVersion"] != "" {
		t.Errorf("claimRef %v", cr)
	}
	pvc := obj(t, `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"c","namespace":"a"},"spec":{"volumeName":"pv1"}}`)
	Apply(c, "", pvc)
	if v, _, _ := unstructured.NestedString(pvc.Object, "spec", "volumeName"); v != "pv1-x" || pvc.GetNamespace() != "b" {
		t.Errorf("PVC volumeName %q namespace %q", v, pvc.GetNamespace())
	}
	bound := obj(t, `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"d","namespace":"a","annotations":{"pv.kubernetes.io/bind-completed":"yes","pv.kubernetes.io/bound-by-controller":"yes","keep":"me"}},"spec":{"volumeName":"pv1"}}`)
	Apply(c, "", bound)
	if ann := bound.GetAnnotations(); len(ann) != 1 || ann["keep"] != "me" {
		t.Errorf("a claim of a restored PV keeps its binding annotations (the target then marks it Lost): %v", ann)
	}
	tok := obj(t, `{"apiVersion":"v1","kind":"Secret","type":"kubernetes.io/service-account-token","metadata":{"name":"t","annotations":{"kubernetes.io/service-account.name":"bot","kubernetes.io/service-account.uid":"old-uid"}},"data":{"token":"eA=="}}`)
	Apply(c, "", tok)
	if ann := tok.GetAnnotations(); ann["kubernetes.io/service-account.uid"] != "" || ann["kubernetes.io/service-account.name"] != "bot" || tok.Object["data"] != nil {
		t.Errorf("token Secret: annotations %v data %v", ann, tok.Object["data"])
	}
	orphan := obj(t, `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"o","annotations":{"pv.kubernetes.io/bind-completed":"yes"}},"spec":{"volumeName":"gone"}}`)
	Apply(c, "", orphan)
	if v, _, _ := unstructured.NestedString(orphan.Object, "spec", "volumeName"); v != "" || len(orphan.GetAnnotations()) != 0 {
		t.Errorf("PVC of an unrestored PV: volumeName %q annotations %v", v, orphan.GetAnnotations())
	}
	cm := obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","uid":"1","resourceVersion":"2","managedFields":[{}],
	  "ownerReferences":[{"apiVersion":"v1","kind":"A","name":"a","uid":"old"},{"apiVersion":"v1","kind":"B","name":"b","uid":"missing"}]},"status":{"x":1}}`)
	notes := Apply(c, "", cm)
	refs := cm.GetOwnerReferences()
	if len(refs) != 1 || refs[0].UID != "new" {
		t.Errorf("ownerReferences %v", refs)
	}
	if cm.GetUID() != "" || cm.GetResourceVersion() != "" || cm.GetManagedFields() != nil || cm.Object["status"] != nil {
		t.Error("server fields kept")
	}
	if !strings.Contains(strings.Join(notes, ";"), "B b removed") {
		t.Errorf("dropped owner not reported: %v", notes)
	}
}

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("a", 80)
	v := LabelValue(long)
	if len(v) > 63 || LabelValue(long) != v || LabelValue(long+"b") == v {
		t.Errorf("LabelValue: %q", v)
	}
	if LabelValue("short") != "short" {
		t.Error("short value changed")
	}
}

func TestStorageClassMapping(t *testing.T) {
	c := &Context{StorageClassMapping: map[string]string{"alicloud-disk-ssd": "cbs-ssd", "fast": "premium"}}
	pvc := obj(t, `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"c"},"spec":{"storageClassName":"alicloud-disk-ssd"}}`)
	pv := obj(t, `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"p"},"spec":{"storageClassName":"alicloud-disk-ssd"}}`)
	sts := obj(t, `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"s"},"spec":{"volumeClaimTemplates":[
	  {"metadata":{"name":"data","annotations":{"volume.beta.kubernetes.io/storage-class":"fast"}},"spec":{}},
	  {"metadata":{"name":"logs"},"spec":{"storageClassName":"alicloud-disk-ssd"}},
	  {"metadata":{"name":"other"},"spec":{"storageClassName":"unmapped"}}]}}`)
	dep := obj(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"volumes":[
	  {"name":"scratch","ephemeral":{"volumeClaimTemplate":{"spec":{"storageClassName":"fast"}}}},{"name":"cfg","configMap":{"name":"x"}}]}}}}`)
	cron := obj(t, `{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"cj"},"spec":{"jobTemplate":{"spec":{"template":{"spec":{"volumes":[
	  {"name":"tmp","ephemeral":{"volumeClaimTemplate":{"spec":{"storageClassName":"alicloud-disk-ssd"}}}}]}}}}}}`)
	for _, u := range []*unstructured.Unstructured{pvc, pv, sts, dep, cron} {
		if notes := Apply(c, "", u); len(notes) == 0 {
			t.Errorf("%s: no change reported", u.GetKind())
		}
	}
	get := func(u *unstructured.Unstructured, path ...string) string {
		v, _, _ := unstructured.NestedString(u.Object, path...)
		return v
	}
	if get(pvc, "spec", "storageClassName") != "cbs-ssd" || get(pv, "spec", "storageClassName") != "cbs-ssd" {
		t.Errorf("PVC/PV not mapped: %v %v", pvc.Object["spec"], pv.Object["spec"])
	}
	tpls, _, _ := unstructured.NestedSlice(sts.Object, "spec", "volumeClaimTemplates")
	ann := tpls[0].(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any)
	if ann["volume.beta.kubernetes.io/storage-class"] != "premium" || tpls[1].(map[string]any)["spec"].(map[string]any)["storageClassName"] != "cbs-ssd" ||
		tpls[2].(map[string]any)["spec"].(map[string]any)["storageClassName"] != "unmapped" {
		t.Errorf("volumeClaimTemplates: %v", tpls)
	}
	vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	if sc, _, _ := unstructured.NestedString(vols[0].(map[string]any), "ephemeral", "volumeClaimTemplate", "spec", "storageClassName"); sc != "premium" {
		t.Errorf("ephemeral volume: %v", vols[0])
	}
	cvols, _, _ := unstructured.NestedSlice(cron.Object, "spec", "jobTemplate", "spec", "template", "spec", "volumes")
	if sc, _, _ := unstructured.NestedString(cvols[0].(map[string]any), "ephemeral", "volumeClaimTemplate", "spec", "storageClassName"); sc != "cbs-ssd" {
		t.Errorf("CronJob ephemeral volume: %v", cvols[0])
	}
}
