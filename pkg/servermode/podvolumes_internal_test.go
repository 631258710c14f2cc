package servermode

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/nodeagent"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// A PodVolumeBackup of the wanted name that exists already is taken only
// when the same Backup made it for the same pod volume (a retry); one of
// another Backup (or a hash collision) fails that volume, naming it,
// instead of lending it another volume's snapshot.
func TestPodVolumeBackupAdoption(t *testing.T) {
	vol := volumes.PodVolume{Namespace: "app", Pod: "db", PodUID: "pod-1", Node: "n1", Volume: "data", Identity: "pod/app/db/data"}
	existing := func(owner string, volume string) *v1alpha1.PodVolumeBackup {
		return &v1alpha1.PodVolumeBackup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ferry", Name: kube.ObjectName("b1", vol.Key()),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Backup", Name: "b1", UID: types.UID("uid-" + owner)}}},
			Spec:   v1alpha1.PodVolumeBackupSpec{Pod: v1alpha1.PodReference{Namespace: "app", Name: "db", UID: "pod-1"}, Volume: volume, Node: "n1", BackupName: "b1", Identity: vol.Identity},
			Status: v1alpha1.PodVolumeStatus{Phase: v1alpha1.PhaseCompleted, SnapshotID: "snap-of-" + owner, BytesDone: 7},
		}
	}
	for _, c := range []struct {
		name   string
		obj    *v1alpha1.PodVolumeBackup
		want   string // record's snapshot, or
		errHas string
	}{
		{"a retry of the same Backup", existing("mine", "data"), "snap-of-mine", ""},
		{"another Backup's", existing("theirs", "data"), "", "exists for another Backup"},
		{"the same Backup, another volume", existing("mine", "cache"), "", "volume cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := metav1.NewMicroTime(time.Now())
			node, dur := "n1", int32(nodeagent.LeaseDurationSecs)
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry", Name: nodeagent.LeaseName("n1")},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, RenewTime: &now, LeaseDurationSeconds: &dur}}
			cl := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(c.obj, lease).WithStatusSubresource(c.obj).Build()
			p := &podVolumes{client: cl, reader: cl, ns: "ferry", location: "default", backupName: "b1",
				owner:   metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Backup", Name: "b1", UID: "uid-mine"},
				timeout: time.Second, clock: clock.RealClock{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			out := p.backup(context.Background(), "b1", []volumes.PodVolume{vol}, nil)
			if len(out) != 1 {
				t.Fatalf("%d records", len(out))
			}
			got := out[0]
			if c.errHas != "" {
				if !strings.Contains(got.Error, c.errHas) || got.SnapshotResult != nil {
					t.Fatalf("record %+v, want an error with %q", got, c.errHas)
				}
				return
			}
			if got.Error != "" || got.SnapshotResult == nil || got.SnapshotID != c.want {
				t.Fatalf("record %+v, want snapshot %s", got, c.want)
			}
		})
	}
}
