package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

// The tamper test's flip positions come from a random seed, logged; to
// replay a failure, pass the logged seed with -tamper-seed or in the
// environment.
var tamperSeedFlag = flag.Int64("tamper-seed", 0, "seed of TestTamper's flip positions (0: "+tamperSeedEnv+", else the time)")

const tamperSeedEnv = "FERRY_TAMPER_SEED"

// tamperSeed is -tamper-seed, else $FERRY_TAMPER_SEED, else the time.
func tamperSeed(t *testing.T) int64 {
	t.Helper()
	if *tamperSeedFlag != 0 {
		return *tamperSeedFlag
	}
	if v := os.Getenv(tamperSeedEnv); v != "" {
		seed, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: not an integer: %v", tamperSeedEnv, v, err)
		}
		return seed
	}
	return time.Now().UnixNano()
}

// TestTamper flips one byte of a stored archive at 20 positions (the
// stream's head, its middle, and its tail where the manifest is), and one
// byte of the manifest itself with the archive's digests updated to match:
// every case is refused by `restore create` and `backup verify`, naming
// the object, with nothing written to the target.
func TestTamper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	e := newEnv(t)
	src := kubernetes.NewForConfigOrDie(e.src.Config)
	dst := kubernetes.NewForConfigOrDie(e.dst.Config)
	createApp(t, src, "app")
	e.backup(t, "good", "--include-namespaces", "app")
	storeDir := strings.TrimPrefix(e.storage, "file://")
	before := targetNamespaces(t, dst)
	good, err := os.ReadFile(filepath.Join(storeDir, "backups", "good", "good.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	seed := tamperSeed(t)
	t.Logf("flip positions from seed %d (reproduce with -tamper-seed=%d or %s=%d)", seed, seed, tamperSeedEnv, seed)
	rng := rand.New(rand.NewSource(seed))
	var positions []int
	for i := 0; i < 20; i++ {
		// A fraction of the length, not rng.Intn(len): a seed gives the same
		// positions again when the archive's size differs by a few bytes.
		f := rng.Float64()
		switch i % 4 {
		case 0:
			positions = append(positions, int(f*64)) // gzip header and first block
		case 3:
			positions = append(positions, len(good)-1-int(f*float64(len(good)/10))) // the tail: manifest, trailer
		default:
			positions = append(positions, int(f*float64(len(good))))
		}
	}
	t.Logf("archive of %d bytes, flip positions %v", len(good), positions)
	refused := func(name, object string) {
		t.Helper()
		r := e.run(t, "restore", "create", "r-"+name, "--from-backup", name, "--context", "dst")
		if r.code != 1 || !strings.Contains(r.stderr, object) {
			t.Errorf("restore of %s: exit %d, want 1 naming %s\nstderr: %s", name, r.code, object, r.stderr)
		}
		v := e.run(t, "backup", "verify", name)
		if v.code != 1 || !strings.Contains(v.stderr, object) {
			t.Errorf("verify of %s: exit %d, want 1 naming %s\nstderr: %s", name, v.code, object, v.stderr)
		}
	}
	for i, pos := range positions {
		name := fmt.Sprintf("flip%d", i)
		dir := copyBackup(t, storeDir, "good", name)
		bad := append([]byte(nil), good...)
		bit := rng.Intn(8)
		bad[pos] ^= byte(1 << bit)
		t.Logf("%s: byte %d, bit %d", name, pos, bit)
		if err := os.WriteFile(filepath.Join(dir, name+".tar.gz"), bad, 0o644); err != nil {
			t.Fatal(err)
		}
		refused(name, "backups/"+name+"/"+name+".tar.gz")
	}
	// The manifest changed, the archive's size and digest updated to match:
	// only the manifest digest in ferry-backup.json can catch it.
	dir := copyBackup(t, storeDir, "good", "manifest")
	archivePath := filepath.Join(dir, "manifest.tar.gz")
	data, err := rewriteEntry(archivePath, "ferry/manifest.json", func(b []byte) []byte {
		b = append([]byte(nil), b...)
		b[len(b)/2] ^= 0x01
		return b
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archivePath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	editMarker(t, filepath.Join(dir, "ferry-backup.json"), func(m map[string]any) {
		a := m["status"].(map[string]any)["archive"].(map[string]any)
		a["size"] = len(data)
		a["sha256"] = hex.EncodeToString(sum[:])
	})
	refused("manifest", "ferry/manifest.json")
	checkTargetUntouched(t, dst, before)
	// The good backup is still good.
	if v := e.run(t, "backup", "verify", "good"); v.code != 0 {
		t.Errorf("verify good: exit %d %s", v.code, v.stderr)
	}
}
