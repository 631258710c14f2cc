package backup

import (
	"context"
	"errors"
	"testing"

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
