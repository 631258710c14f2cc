package volumes

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

func pod(ns, name string, ann map[string]string, vols ...corev1.Volume) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Annotations: ann}, Spec: corev1.PodSpec{Volumes: vols}}
}

func vol(name string, src corev1.VolumeSource) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: src}
}

// A name in the annotation that is no volume of the pod (a typo) is a
// requested skip with the reason, not silently nothing.
func TestSelectUnknownName(t *testing.T) {
	p := pod("a", "db", map[string]string{v1alpha1.AnnotationBackupVolumes: "data,dta"}, vol("data", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}))
	vols, skipped := Select([]corev1.Pod{p}, false, false)
	if len(vols) != 1 || vols[0].Volume != "data" {
		t.Errorf("volumes %+v", vols)
	}
	if len(skipped) != 1 || skipped[0].Volume != "dta" || !skipped[0].Requested || !strings.Contains(skipped[0].Reason, "no volume of that name") {
		t.Errorf("skipped %+v", skipped)
	}
}

func TestSelect(t *testing.T) {
	claim := func(c string) corev1.VolumeSource {
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}
	}
	all := []corev1.Volume{
		vol("data", claim("shared")),
		vol("cache", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		vol("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		vol("host", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}),
		vol("sec", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}),
		vol("cm", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}),
		vol("proj", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}),
		vol("down", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}),
		vol("logs", claim("logs")),
	}
	pods := []corev1.Pod{
		pod("b", "web-1", map[string]string{v1alpha1.AnnotationBackupVolumes: "data, cache", v1alpha1.AnnotationExcludeVolumes: "logs"}, all...),
		pod("b", "web-0", map[string]string{v1alpha1.AnnotationBackupVolumes: "data,cache,host"}, all...),
		pod("a", "other", nil, vol("data", claim("own"))),
	}
	pods[2].Status.Phase = corev1.PodRunning

	// Opt-in: only the annotated volumes; host is never copied.
	vols, skipped := Select(pods, false, false)
	var got []string
	for _, v := range vols {
		got = append(got, v.Key()+" "+v.Identity+" "+strings.Join(v.AlsoMountedBy, ","))
	}
	want := []string{
		"b/web-0/data pvc/b/shared b/web-1",
		"b/web-0/cache pod/b/web-0/cache ",
		"b/web-1/cache pod/b/web-1/cache ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("opt-in volumes:\n%q\nwant\n%q", got, want)
	}
	if len(skipped) != 1 || skipped[0].Volume != "host" || !strings.HasPrefix(skipped[0].Reason, "hostPath") || !skipped[0].Requested {
		t.Errorf("opt-in skipped: %+v", skipped)
	}

	// Opt-out: everything but the excluded, never-copied and emptyDir volumes
	// that are not named.
	vols, skipped = Select(pods, true, false)
	got = nil
	for _, v := range vols {
		got = append(got, v.Key())
	}
	want = []string{"a/other/data", "b/web-0/data", "b/web-0/cache", "b/web-0/logs", "b/web-1/cache"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("opt-out volumes: %q, want %q", got, want)
	}
	reasons := map[string]string{}
	for _, s := range skipped {
		reasons[s.Pod+"/"+s.Volume] = s.Reason
	}
	for k, prefix := range map[string]string{
		"web-1/logs": "excluded by", "web-0/scratch": "emptyDir", "web-0/host": "hostPath", "web-0/sec": "secret",
		"web-0/cm": "configMap", "web-0/proj": "projected", "web-0/down": "downwardAPI",
	} {
		if !strings.HasPrefix(reasons[k], prefix) {
			t.Errorf("%s skipped with %q, want %s...", k, reasons[k], prefix)
		}
	}

	pods[2].Status.Phase = corev1.PodSucceeded
	_, skipped = Select(pods[2:], true, false)
	if len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "Succeeded") {
		t.Errorf("finished pod: %+v", skipped)
	}
}

func TestHostPath(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk("u1/volumes/kubernetes.io~csi/pv-1/mount")
	mk("u1/volumes/kubernetes.io~empty-dir/cache")
	mk("u2/volumes/kubernetes.io~csi/pv-2") // not mounted
	got, err := HostPath(dir, "u1", PodVolume{Volume: "data", ClaimName: "c", PVName: "pv-1"})
	if err != nil || got != filepath.Join(dir, "u1/volumes/kubernetes.io~csi/pv-1/mount") {
		t.Errorf("csi: %q %v", got, err)
	}
	got, err = HostPath(dir, "u1", PodVolume{Volume: "cache"})
	if err != nil || got != filepath.Join(dir, "u1/volumes/kubernetes.io~empty-dir/cache") {
		t.Errorf("emptyDir: %q %v", got, err)
	}
	if _, err := HostPath(dir, "u1", PodVolume{Namespace: "n", Pod: "p", Volume: "data", ClaimName: "c"}); err == nil || !strings.Contains(err.Error(), "not bound") {
		t.Errorf("unbound claim: %v", err)
	}
	if _, err := HostPath(dir, "u2", PodVolume{Volume: "data", ClaimName: "c", PVName: "pv-2"}); err == nil || !strings.Contains(err.Error(), "not mounted") {
		t.Errorf("unmounted csi: %v", err)
	}
	if _, err := HostPath(dir, "u3", PodVolume{Namespace: "n", Pod: "p", Volume: "x"}); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "u3/volumes/*/x")) {
		t.Errorf("missing: %v", err)
	}
}
