package volumes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/kopia/kopia/snapshot"
)

// dirTimes returns the recorded modification time of every directory
// below dir (slash-separated paths relative to the snapshot root).
//
// kopia's snapshot filesystem (snapshotfs) reports a directory's time as
// the newest time in its subtree (DirSummary.MaxModTime), so its restorer
// sets that; the directory objects still hold each directory's own time,
// which is what a volume had. Restore puts those back.
func (r *Repository) dirTimes(ctx context.Context, dir *snapshot.DirEntry) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	var walk func(rel string, de *snapshot.DirEntry) error
	walk = func(rel string, de *snapshot.DirEntry) error {
		rd, err := r.rep.OpenObject(ctx, de.ObjectID)
		if err != nil {
			return fmt.Errorf("directory %q: %w", rel, err)
		}
		var m snapshot.DirManifest
		err = json.NewDecoder(rd).Decode(&m)
		rd.Close()
		if err != nil {
			return fmt.Errorf("directory %q: %w", rel, err)
		}
		for _, e := range m.Entries {
			if e.Type != snapshot.EntryTypeDirectory {
				continue
			}
			p := path.Join(rel, e.Name)
			out[p] = e.ModTime.ToTime()
			if err := walk(p, e); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk("", dir)
}

// setDirTimes applies times (from dirTimes) under root.
func setDirTimes(root string, times map[string]time.Time) error {
	for rel, t := range times {
		if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(rel)), t, t); err != nil {
			return err
		}
	}
	return nil
}
