package volumes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// Targets gives volume data only to pods that wait for it, with the
// done-marker each waits for; a pod that runs (not made to wait by a
// ferry restore), or waits for another backup's data, is ErrNotWaiting
// and nothing targets it.
func TestTargetsOnlyWaitingPods(t *testing.T) {
	waiting := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "waits", UID: "u1", Annotations: map[string]string{v1alpha1.AnnotationRestoreUID: "earlier-restore", v1alpha1.AnnotationRestoreBackup: "b1"}},
		Spec:       corev1.PodSpec{InitContainers: []corev1.Container{{Name: v1alpha1.RestoreWaitContainer}}},
	}
	other := waiting.DeepCopy()
	other.Name, other.UID, other.Annotations = "other", "u3", map[string]string{v1alpha1.AnnotationRestoreUID: "x", v1alpha1.AnnotationRestoreBackup: "b0"}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "runs", UID: "u2"}}
	cs := fake.NewClientset(waiting, running, other)
	snap := &SnapshotResult{SnapshotID: "s"}
	rec := &BackupRecord{Volumes: []PodVolumeBackup{
		{PodVolume: PodVolume{Namespace: "app", Pod: "waits", Volume: "cache", Identity: "pod/app/waits/cache"}, SnapshotResult: snap},
		{PodVolume: PodVolume{Namespace: "app", Pod: "runs", Volume: "cache", Identity: "pod/app/runs/cache"}, SnapshotResult: snap},
		{PodVolume: PodVolume{Namespace: "app", Pod: "other", Volume: "cache", Identity: "pod/app/other/cache"}, SnapshotResult: snap},
	}}
	targets, failed := Targets(context.Background(), cs, "b1", rec, func(ns string) string { return ns }, time.Second)
	if len(targets) != 1 || targets[0].Pod != "waits" || targets[0].PodUID != "u1" || targets[0].MarkerUID("this-restore") != "earlier-restore" {
		t.Fatalf("targets %+v", targets)
	}
	if len(failed) != 2 || failed[0].Pod != "runs" || !strings.Contains(failed[0].Error, ErrNotWaiting.Error()) || !strings.Contains(failed[0].Error, "app/runs") {
		t.Fatalf("failed %+v", failed)
	}
	if failed[1].Pod != "other" || !strings.Contains(failed[1].Error, "waits for the data of backup b0, not of b1") {
		t.Fatalf("a pod waiting for another backup: %+v", failed[1])
	}
	if (RestoreTarget{}).MarkerUID("own") != "own" {
		t.Fatal("MarkerUID of a target without RestoreUID")
	}
}
