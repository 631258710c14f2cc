package volumes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeferry/ferry/pkg/transform"
)

// Targets gives volume data only to pods that wait for it, with the
// done-marker each waits for; a pod that runs (not made to wait by a
// ferry restore) is ErrNotWaiting and nothing targets it.
func TestTargetsOnlyWaitingPods(t *testing.T) {
	waiting := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "waits", UID: "u1", Annotations: map[string]string{transform.AnnotationRestoreUID: "earlier-restore"}},
		Spec:       corev1.PodSpec{InitContainers: []corev1.Container{{Name: transform.RestoreWaitContainer}}},
	}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "runs", UID: "u2"}}
	cs := fake.NewClientset(waiting, running)
	snap := &SnapshotResult{SnapshotID: "s"}
	rec := &BackupRecord{Volumes: []PodVolumeBackup{
		{PodVolume: PodVolume{Namespace: "app", Pod: "waits", Volume: "cache", Identity: "pod/app/waits/cache"}, SnapshotResult: snap},
		{PodVolume: PodVolume{Namespace: "app", Pod: "runs", Volume: "cache", Identity: "pod/app/runs/cache"}, SnapshotResult: snap},
	}}
	targets, failed := Targets(context.Background(), cs, rec, func(ns string) string { return ns }, time.Second)
	if len(targets) != 1 || targets[0].Pod != "waits" || targets[0].PodUID != "u1" || targets[0].MarkerUID("this-restore") != "earlier-restore" {
		t.Fatalf("targets %+v", targets)
	}
	if len(failed) != 1 || failed[0].Pod != "runs" || !strings.Contains(failed[0].Error, ErrNotWaiting.Error()) || !strings.Contains(failed[0].Error, "app/runs") {
		t.Fatalf("failed %+v", failed)
	}
	if (RestoreTarget{}).MarkerUID("own") != "own" {
		t.Fatal("MarkerUID of a target without RestoreUID")
	}
}
