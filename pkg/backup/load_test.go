package backup

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestLoadNotFound: loading a backup that is not in the location is
// ErrNotRestorable and keeps the cause, store.ErrNotFound.
func TestLoadNotFound(t *testing.T) {
	ctx := context.Background()
	loc, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	for name, load := range map[string]func(context.Context, *store.Location, string) error{
		"Load": func(ctx context.Context, l *store.Location, n string) error { _, _, err := Load(ctx, l, n); return err },
		"LoadVelero": func(ctx context.Context, l *store.Location, n string) error {
			_, _, err := LoadVelero(ctx, l, n)
			return err
		},
	} {
		if err := load(ctx, loc, "nosuch"); !errors.Is(err, ErrNotRestorable) || !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s = %v, want ErrNotRestorable and store.ErrNotFound", name, err)
		}
	}
}

// TestLoadWithoutArchiveKey: a commit marker whose archive record has no
// key (hand-edited, or written by a broken tool) is refused by name, not
// read at the store's root.
func TestLoadWithoutArchiveKey(t *testing.T) {
	ctx := context.Background()
	loc, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	for name, archive := range map[string]*v1alpha1.ArchiveSummary{"no-archive": nil, "no-key": {Size: 10, SHA256: "00"}} {
		b := v1alpha1.NewBackup(name)
		b.Status.Phase = v1alpha1.PhaseCompleted
		b.Status.Archive = archive
		if err := loc.PutJSON(ctx, store.BackupDir(name)+store.BackupMarker, b); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load(ctx, loc, name)
		if !errors.Is(err, ErrNotRestorable) || !strings.Contains(err.Error(), "has no archive record (status.archive.key)") {
			t.Errorf("%s: Load = %v, want ErrNotRestorable naming status.archive.key", name, err)
		}
	}
}
