package benchutil

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kopia/kopia/repo/content"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/volumes"
	"github.com/kubeferry/ferry/pkg/volumes/volumetest"
)

// KopiaVersion is the kopia release pkg/volumes links as a library, and
// the version of the kopia CLI the volume benchmarks compare it with.
const KopiaVersion = "v0.22.3"

// KopiaCLI runs the kopia CLI on one repository's config file. Every
// command gets the same global flags: no automatic maintenance and no
// logs (ferry's library use runs no maintenance and writes no logs).
type KopiaCLI struct {
	Bin, Config, Password string
}

// Args are the arguments of "env" that run kopia with args. The boolean
// flags are given bare or as --no-NAME: kopia's flag parser (kingpin
// v2.4.0) reads "--auto-maintenance=false" as --auto-maintenance (true)
// followed by an argument "false", which "snapshot create" takes for a
// second folder to back up.
func (k KopiaCLI) Args(args ...string) []string {
	return append([]string{"KOPIA_PASSWORD=" + k.Password, "KOPIA_CHECK_FOR_UPDATES=false", k.Bin}, append(args,
		"--config-file", k.Config, "--no-auto-maintenance", "--disable-repository-log", "--disable-file-logging", "--disable-content-log")...)
}

// NoMaintenance checks that no maintenance has run in k's repository.
func (k KopiaCLI) NoMaintenance(ctx context.Context) error {
	o, err := k.Run(ctx, "maintenance", "info", "--json")
	if err != nil {
		return err
	}
	var info struct {
		Schedule struct {
			Runs map[string]json.RawMessage `json:"runs"`
		} `json:"schedule"`
	}
	if err := json.Unmarshal(o, &info); err != nil {
		return fmt.Errorf("kopia maintenance info: %w", err)
	}
	if len(info.Schedule.Runs) > 0 {
		return fmt.Errorf("kopia ran maintenance during the benchmark: %s", Tail(string(o), 300))
	}
	return nil
}

// Run runs one untimed kopia command and returns its stdout.
func (k KopiaCLI) Run(ctx context.Context, args ...string) ([]byte, error) {
	o, e, _, _, code, err := Child(ctx, "env", k.Args(args...)...)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d", code)
	}
	if err != nil {
		return nil, fmt.Errorf("kopia %s: %v %s", strings.Join(args, " "), err, Tail(string(e), 500))
	}
	return o, nil
}

// Create creates a repository in storage (the arguments of "kopia
// repository create": "filesystem", "--path", DIR, or "s3", "--bucket",
// ...) in ferry's format (pkg/volumes' splitter; kopia's default
// encryption and hash, which are ferry's), with kopia's content and
// metadata caches off, and checks from the config file that they are.
func (k KopiaCLI) Create(ctx context.Context, storage ...string) error {
	args := append(append([]string{"repository", "create"}, storage...), "--object-splitter", volumes.Splitter,
		"--content-cache-size-mb=0", "--metadata-cache-size-mb=0")
	if _, err := k.Run(ctx, args...); err != nil {
		return err
	}
	// The config file's caching section, read as kopia's LocalConfig
	// holds it (kopiarepo.LoadConfigFromFile would also decode the storage,
	// which needs that storage type's package linked in).
	data, err := os.ReadFile(k.Config)
	if err != nil {
		return fmt.Errorf("kopia config: %w", err)
	}
	var lc struct {
		Caching *content.CachingOptions `json:"caching"`
	}
	if err := json.Unmarshal(data, &lc); err != nil {
		return fmt.Errorf("kopia config %s: %w", k.Config, err)
	}
	if c := lc.Caching; c != nil && (c.CacheDirectory != "" || c.ContentCacheSizeBytes != 0 || c.MetadataCacheSizeBytes != 0) {
		return fmt.Errorf("kopia config %s: caches are on (%s, content %d B, metadata %d B)", k.Config, c.CacheDirectory, c.ContentCacheSizeBytes, c.MetadataCacheSizeBytes)
	}
	return nil
}

// LatestSnapshot returns the ID of the newest snapshot of source.
func (k KopiaCLI) LatestSnapshot(ctx context.Context, source string) (string, error) {
	o, err := k.Run(ctx, "snapshot", "list", source, "--json")
	if err != nil {
		return "", err
	}
	var snaps []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(o, &snaps); err != nil || len(snaps) == 0 {
		return "", fmt.Errorf("kopia snapshot list: %v %s", err, Tail(string(o), 300))
	}
	return snaps[len(snaps)-1].ID, nil
}

// InstallKopia builds the kopia CLI of KopiaVersion into the tools cache
// (~/.cache/ferry/bin/kopia, or $FERRY_TOOLS_BIN), once, and returns its
// path. The build needs the network (the module proxy) the first time.
func InstallKopia(program string) (string, error) {
	dir := os.Getenv("FERRY_TOOLS_BIN")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(cache, "ferry", "bin")
	}
	bin := filepath.Join(dir, "kopia")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	Logf(program, "building kopia %s into %s (a few minutes, once)", KopiaVersion, dir)
	// "go install github.com/kopia/kopia@v0.22.3" would do, but the module
	// proxy refuses the version list it reads for deprecation notices; a
	// throw-away module that requires kopia builds the same binary with
	// kopia's own dependency versions.
	mod, err := os.MkdirTemp("", "ferry-kopia-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(mod)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module ferry.local/kopiabuild\n\ngo 1.26\n"), 0o644); err != nil {
		return "", err
	}
	for _, args := range [][]string{{"get", "github.com/kopia/kopia@" + KopiaVersion}, {"build", "-o", bin, "github.com/kopia/kopia"}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = mod
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("building kopia: go %s: %w", strings.Join(args, " "), err)
		}
	}
	return bin, nil
}

// CheckRestore compares a restore with the data set: content, modes and
// modification times of every file and folder, the same for every tool
// (ferry's done-marker folder is not part of the data). Any difference is
// an error.
func CheckRestore(tool, data, restored string) error {
	diffs, err := volumetest.Compare(data, restored, v1alpha1.DoneMarkerDir)
	if err != nil {
		return fmt.Errorf("comparing %s's restore with the data set: %w", tool, err)
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s's restore differs from the data set:\n  %s", tool, strings.Join(diffs, "\n  "))
	}
	return nil
}

// Median returns the median of xs (0 for none), leaving xs as it is.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Sorted(slices.Values(xs))
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
