package restore

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/transform"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// A claim shared by two pods is backed up through the first (a); when
// the restore leaves a out (a filter) but restores b, b gets the data
// itself. It once got nothing and no error, and waited for ever.
func TestSharedClaimFirstPodNotRestored(t *testing.T) {
	waiting := func(name, volume string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: k8stypes.UID("uid-" + name), Annotations: map[string]string{v1alpha1.AnnotationRestoreUID: "r-uid", v1alpha1.AnnotationRestoreBackup: "b1"}},
			Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: v1alpha1.RestoreWaitContainer}},
				Volumes: []corev1.Volume{{Name: volume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}}}},
		}
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "shared"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	cluster := &kube.Cluster{Typed: fake.NewClientset(waiting("b", "files"), claim)}
	rec := &volumes.BackupRecord{Volumes: []volumes.PodVolumeBackup{{
		PodVolume:      volumes.PodVolume{Namespace: "app", Pod: "a", Volume: "data", ClaimName: "shared", Identity: "pvc/app/shared", AlsoMountedBy: []string{"app/b"}},
		SnapshotResult: &volumes.SnapshotResult{SnapshotID: "snap-1"},
	}}}
	pvr := &transform.PodVolumeRestore{RestoreUID: "r-uid", Volumes: map[string][]string{"app/b": {"files"}}}
	var got []volumes.RestoreTarget
	o := &Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), PodVolumes: &PodVolumeOptions{Wait: time.Second,
		Restore: func(_ context.Context, uid string, targets []volumes.RestoreTarget, _ time.Duration, _ func(volumes.Totals)) []volumes.PodVolumeRestore {
			got = targets
			out := make([]volumes.PodVolumeRestore, len(targets))
			for i, tg := range targets {
				out[i] = volumes.PodVolumeRestore{RestoreTarget: tg, RestoreResult: &volumes.RestoreResult{SnapshotID: tg.SnapshotID}}
			}
			return out
		}}}
	o.Spec.BackupName = "b1"
	results := &report.Results{}
	sum, _ := restorePodVolumes(context.Background(), cluster, rec, pvr, o, results, nil)
	if len(got) != 1 || got[0].Pod != "b" || got[0].Volume != "files" || got[0].MarkerOnly || got[0].SnapshotID != "snap-1" || got[0].PVName != "pv-1" {
		t.Fatalf("targets %+v", got)
	}
	if sum.Completed != 1 || sum.Failed != 0 {
		t.Fatalf("summary %+v, errors %v", sum, results.Errors)
	}
}
