package retention

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

const password = "retention test password"

// stored writes a committed backup name (UID uid) into loc, and, when
// snapshotted, one kopia snapshot of a small folder tagged with it and a
// volume record listing it; otherwise a record of one failed volume.
func stored(t *testing.T, loc *store.Location, repo *volumes.Repository, name string, uid types.UID, snapshotted bool) {
	t.Helper()
	ctx := context.Background()
	b := v1alpha1.NewBackup(name)
	b.UID = uid
	b.Status.Phase = v1alpha1.PhaseCompleted
	vol := volumes.PodVolumeBackup{PodVolume: volumes.PodVolume{Namespace: "ns", Pod: "db-0", Volume: "data"}, Error: "no helper pod could mount it"}
	if snapshotted {
		src := t.TempDir()
		if err := os.WriteFile(filepath.Join(src, "row"), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := repo.Snapshot(ctx, src, "pvc/ns/"+name, map[string]string{volumes.TagBackup: name}, nil)
		if err != nil {
			t.Fatal(err)
		}
		vol.SnapshotResult, vol.Error = res, ""
	}
	if err := loc.PutJSON(ctx, store.BackupVolumesKey(name), volumes.BackupRecord{Repository: volumes.RepositoryPrefix, Volumes: []volumes.PodVolumeBackup{vol}}); err != nil {
		t.Fatal(err)
	}
	if err := loc.PutJSON(ctx, store.BackupDir(name)+store.BackupMarker, b); err != nil {
		t.Fatal(err)
	}
}

// TestDelete runs the one backup deletion through the cases that the CLI,
// server mode and the hub each met: every case ends with the folder and
// the snapshots that must be left, and nothing else.
func TestDelete(t *testing.T) {
	noPassword := func(context.Context) (*volumes.Repository, error) { return nil, volumes.ErrNoPassword }
	for _, tc := range []struct {
		name string
		// before changes the location first; req is the request for
		// backup "old" (UID "uid-old"), whose data has a snapshot.
		before          func(t *testing.T, loc *store.Location)
		req             Request
		noSnapshot      bool // "old" has a volume record of a failed volume only
		wantErr         error
		wantAnyErr      bool
		wantFolder      Folder
		wantPruned      int  // snapshots deleted
		wantVolumeError bool // Result.VolumeError set
		wantFolderLeft  bool // "old"'s folder is still there
		wantSnapsLeft   bool // "old"'s snapshot is still there
	}{
		{name: "owned folder with volume data",
			req:        Request{Owns: uidIs("uid-old")},
			wantFolder: FolderDeleted, wantPruned: 1},
		{name: "by name (ferry backup delete)",
			req:        Request{Strict: true},
			wantFolder: FolderDeleted, wantPruned: 1},
		{name: "folder deleted out of band, the caller's status had volume data (the hub's lost fix)",
			before:     deleteFolder,
			req:        Request{Owns: uidIs("uid-old"), HadVolumeData: true},
			wantFolder: FolderGone, wantPruned: 1},
		{name: "folder deleted out of band, nothing says it had volume data",
			before:     deleteFolder,
			req:        Request{Owns: uidIs("uid-old")},
			wantFolder: FolderGone, wantSnapsLeft: true},
		{name: "folder deleted by hand, then ferry backup delete: its leftover snapshots are pruned",
			before:     deleteFolder,
			req:        Request{Strict: true},
			wantFolder: FolderGone, wantPruned: 1},
		{name: "folder deleted by hand, ferry backup delete without the password: nothing known",
			before:     deleteFolder,
			req:        Request{Strict: true, Repository: noPassword},
			wantFolder: FolderGone, wantSnapsLeft: true},
		{name: "folder holds another backup of the name",
			req:        Request{Owns: uidIs("uid-new"), HadVolumeData: true},
			wantFolder: FolderKeptOther, wantFolderLeft: true, wantSnapsLeft: true},
		{name: "strict without the password deletes nothing",
			req:        Request{Strict: true, Repository: noPassword},
			wantErr:    volumes.ErrNoPassword,
			wantFolder: "", wantFolderLeft: true, wantSnapsLeft: true},
		{name: "expiry without the password deletes the folder and says why the snapshots stay",
			req:        Request{Owns: uidIs("uid-old"), Repository: noPassword},
			wantFolder: FolderDeleted, wantVolumeError: true, wantSnapsLeft: true},
		{name: "a record of failed volumes only needs no repository",
			req: Request{Strict: true, Repository: func(context.Context) (*volumes.Repository, error) {
				return nil, errors.New("the repository was opened")
			}},
			noSnapshot: true, wantFolder: FolderDeleted},
		{name: "markers gone, files left: the remains of a delete are deleted and the snapshots pruned",
			before: func(t *testing.T, loc *store.Location) {
				if err := loc.Bucket().Delete(context.Background(), store.BackupDir("old")+store.BackupMarker); err != nil {
					t.Fatal(err)
				}
			},
			req:        Request{Owns: uidIs("uid-old"), HadVolumeData: true},
			wantFolder: FolderDeleted, wantPruned: 1},
		{name: "markers gone, files left, nothing says it had volume data: kept, as not the caller's",
			before: func(t *testing.T, loc *store.Location) {
				if err := loc.Bucket().Delete(context.Background(), store.BackupDir("old")+store.BackupMarker); err != nil {
					t.Fatal(err)
				}
			},
			req:        Request{Owns: uidIs("uid-old")},
			wantFolder: FolderKeptOther, wantFolderLeft: true, wantSnapsLeft: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			loc, err := store.Open(ctx, "file://"+t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer loc.Close()
			repo, err := volumes.Open(ctx, loc, password, volumes.OpenOptions{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			stored(t, loc, repo, "old", "uid-old", !tc.noSnapshot)
			stored(t, loc, repo, "other", "uid-other", true)
			repo.Close(ctx)
			if tc.before != nil {
				tc.before(t, loc)
			}
			req := tc.req
			req.Name = "old"
			if req.Repository == nil {
				req.Repository = func(ctx context.Context) (*volumes.Repository, error) {
					return volumes.Open(ctx, loc, password, volumes.OpenOptions{})
				}
			}
			res, err := Delete(ctx, loc, req)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			case tc.wantErr == nil && err != nil:
				t.Fatalf("error %v", err)
			}
			if err == nil {
				if res.Folder != tc.wantFolder || res.Snapshots != tc.wantPruned || (res.VolumeError != nil) != tc.wantVolumeError {
					t.Errorf("result %+v, want folder %s, %d snapshots deleted, volume error %v", res, tc.wantFolder, tc.wantPruned, tc.wantVolumeError)
				}
			}
			if _, err := loc.GetBackup(ctx, "old"); errors.Is(err, store.ErrNotFound) == tc.wantFolderLeft {
				t.Errorf("folder of old: %v, want left %v", err, tc.wantFolderLeft)
			}
			if n := snapshots(t, loc, "old"); (n > 0) != (tc.wantSnapsLeft && !tc.noSnapshot) {
				t.Errorf("%d snapshots of old left, want left %v", n, tc.wantSnapsLeft)
			}
			if n := snapshots(t, loc, "other"); n != 1 {
				t.Errorf("%d snapshots of the other backup left, want its 1", n)
			}
			if _, err := loc.GetBackup(ctx, "other"); err != nil {
				t.Errorf("the other backup: %v", err)
			}
		})
	}
}

func uidIs(uid types.UID) func(*v1alpha1.Backup) bool {
	return func(b *v1alpha1.Backup) bool { return b.UID == uid }
}

func deleteFolder(t *testing.T, loc *store.Location) {
	t.Helper()
	if err := loc.DeleteBackup(context.Background(), "old"); err != nil {
		t.Fatal(err)
	}
}

func snapshots(t *testing.T, loc *store.Location, backup string) int {
	t.Helper()
	ctx := context.Background()
	repo, err := volumes.Open(ctx, loc, password, volumes.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close(ctx)
	ids, err := repo.ListSnapshots(ctx, backup)
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

func TestExpiration(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	recorded := metav1.NewTime(start.Add(time.Minute))
	hour := &metav1.Duration{Duration: time.Hour}
	for _, tc := range []struct {
		name            string
		recorded, start *metav1.Time
		ttl             *metav1.Duration
		want            *time.Time
	}{
		{"recorded wins", &recorded, &start, hour, &recorded.Time},
		{"start + ttl, for a synced backup", nil, &start, hour, ptr(start.Add(time.Hour))},
		{"no ttl: kept", nil, &start, nil, nil},
		{"zero ttl: kept", nil, &start, &metav1.Duration{}, nil},
		{"not started", nil, nil, hour, nil},
	} {
		got := Expiration(tc.recorded, tc.start, tc.ttl)
		if (got == nil) != (tc.want == nil) || got != nil && !got.Time.Equal(*tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	exp := start.Time
	for _, tc := range []struct {
		now      time.Time
		max      time.Duration
		due      bool
		wantWait time.Duration
	}{
		{exp, 0, true, 0},
		{exp.Add(time.Second), 0, true, 0},
		{exp.Add(-time.Hour), 0, false, time.Hour},
		{exp.Add(-time.Hour), time.Minute, false, time.Minute},
	} {
		if due, wait := Due(exp, tc.now, tc.max); due != tc.due || wait != tc.wantWait {
			t.Errorf("Due at %s (max %s): %v %s, want %v %s", tc.now.Sub(exp), tc.max, due, wait, tc.due, tc.wantWait)
		}
	}
}

func ptr(t time.Time) *time.Time { return &t }
