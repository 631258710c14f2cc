package helperpod

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeferry/ferry/pkg/volumes"
)

// The pods that count as users of a claim, and which of them write it.
func TestClaimUsers(t *testing.T) {
	pod := func(name, node string, phase corev1.PodPhase, readOnlySource, readOnlyMount bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
			Spec: corev1.PodSpec{NodeName: node,
				Volumes:    []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data", ReadOnly: readOnlySource}}}},
				Containers: []corev1.Container{{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "d", MountPath: "/d", ReadOnly: readOnlyMount}}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	other := pod("other", "n1", corev1.PodRunning, false, false)
	other.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "logs"
	h := &Helpers{Client: fake.NewClientset(
		pod("writer", "n1", corev1.PodRunning, false, false),
		pod("reader", "n1", corev1.PodRunning, false, true),
		pod("ro-source", "n1", corev1.PodRunning, true, false),
		pod("done", "n1", corev1.PodSucceeded, false, false),
		pod("pending", "", corev1.PodPending, false, false),
		other)}
	users, err := h.claimUsers(context.Background(), volumes.ClaimRef{Namespace: "app", Claim: "data"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, u := range users {
		got[u.pod.Name] = u.writable
	}
	want := map[string]bool{"writer": true, "reader": false, "ro-source": false}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("users %v, want %v (finished, unscheduled and other claims' pods left out)", got, want)
	}
}

// A check job reads a claim in a node's pods directory and names what
// changed since its restore.
func TestCheckJobPodsDir(t *testing.T) {
	pods := t.TempDir()
	dir := filepath.Join(pods, "uid-1", "volumes", "kubernetes.io~csi", "pv-1", "mount")
	if err := os.MkdirAll(filepath.Join(dir, ".ferry"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What a restore keeps: the list of its entries (volumes.CheckContent
	// with no list yet names nothing).
	v := volumes.PodVolume{Namespace: "app", Pod: "db-0", PodUID: "uid-1", Volume: "data", ClaimName: "data", PVName: "pv-1"}
	out := RunJob(context.Background(), Job{Op: OpCheck, Volume: v, PodsDir: pods}, nil)
	if out.Error != "" || out.Check == nil || out.Check.Files != 1 || !out.Check.NoList {
		t.Fatalf("check: %+v", out)
	}
	bad := RunJob(context.Background(), Job{Op: OpCheck, Volume: volumes.PodVolume{Namespace: "app", Pod: "x", PodUID: "nope", Volume: "data", ClaimName: "data", PVName: "pv-1"}, PodsDir: pods}, nil)
	if bad.Error == "" || bad.Check != nil {
		t.Errorf("a volume not in the pods directory: %+v, want an error", bad)
	}
}

// The outcome of a check fits a termination message, whatever the names
// of the changed files (JSON escapes <, > and & as six bytes each).
func TestCheckOutcomeFits(t *testing.T) {
	pods := t.TempDir()
	dir := filepath.Join(pods, "uid-1", "volumes", "kubernetes.io~csi", "pv-1", "mount")
	if err := os.MkdirAll(filepath.Join(dir, ".ferry"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := volumes.RecordContent(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ {
		name := fmt.Sprintf("%02d", i) + strings.Repeat("<&‹>", 35)
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v := volumes.PodVolume{Namespace: "app", Pod: "db-0", PodUID: "uid-1", Volume: "data", ClaimName: "data", PVName: "pv-1"}
	out := RunJob(context.Background(), Job{Op: OpCheck, Volume: v, PodsDir: pods}, io.Discard)
	b, _ := json.Marshal(out)
	if out.Check == nil || len(out.Check.Changed) == 0 || len(b) > 3500 {
		t.Errorf("outcome of %d bytes, %d paths named: want some paths, under the kubelet's 4096 bytes", len(b), len(out.Check.Changed))
	}
}
