package imagebuild

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// entries reads the image's flattened file system.
func entries(t *testing.T, o Options) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	img, err := Ferry(o)
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	hdrs, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		hdrs["/"+strings.TrimSuffix(h.Name, "/")], data["/"+h.Name] = h, b
	}
	return hdrs, data
}

// fakeFerry builds a small static program that stands in for ferry: it
// prints "ferry-in-image" and its arguments.
func fakeFerry(t *testing.T) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n)\n\nfunc main() { fmt.Println(strings.Join(append([]string{\"ferry-in-image\"}, os.Args[1:]...), \" \")) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module fakeferry\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "ferry")
	build := exec.Command("go", "build", "-o", p, ".")
	build.Dir, build.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in ferry: %v: %s", err, out)
	}
	content, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, content
}

func TestFerryImageLayout(t *testing.T) {
	if _, err := os.Stat(DefaultBusybox); err != nil {
		t.Fatalf("busybox-static is not installed (make test installs it): %v", err)
	}
	ferry, content := fakeFerry(t)
	hdrs, data := entries(t, Options{Ferry: ferry})
	if !bytes.Equal(data[FerryPath], content) || hdrs[FerryPath].Mode != 0o755 {
		t.Errorf("%s: got %d bytes mode %o, want the binary given, 0755", FerryPath, len(data[FerryPath]), hdrs[FerryPath].Mode)
	}
	bb, _ := os.ReadFile(DefaultBusybox)
	if !bytes.Equal(data["/bin/busybox"], bb) {
		t.Error("/bin/busybox is not the busybox given")
	}
	for _, applet := range []string{"sh", "cat", "sha256sum", "sleep", "dd"} {
		h := hdrs["/bin/"+applet]
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("/bin/%s: want a link to busybox, got %+v", applet, h)
		}
	}
	if h := hdrs["/tmp"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp: want mode 1777, got %+v", h)
	}
	if !strings.Contains(string(data["/etc/passwd"]), "root:x:0:0") {
		t.Errorf("/etc/passwd lacks root: %q", data["/etc/passwd"])
	}
}

func TestFerryImageConfigAndDigest(t *testing.T) {
	ferry, _ := fakeFerry(t)
	a, err := Ferry(Options{Ferry: ferry})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := a.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != FerryPath {
		t.Errorf("config: os %q entrypoint %v, want linux [%s]", cf.OS, cf.Config.Entrypoint, FerryPath)
	}
	b, err := Ferry(Options{Ferry: ferry})
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("the same binaries gave two digests: %s, %s", da, db)
	}
	other, err := os.ReadFile(ferry)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ferry, append(other, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Ferry(Options{Ferry: ferry})
	if err != nil {
		t.Fatal(err)
	}
	if dc, _ := c.Digest(); dc == da {
		t.Error("another ferry binary gave the same digest")
	}
}

// TestFerryImageRuns runs the image's own shell and ferry, chrooted into its
// extracted file system.
func TestFerryImageRuns(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("chroot needs root")
	}
	ferry, _ := fakeFerry(t)
	img, err := Ferry(Options{Ferry: ferry})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	untar := exec.Command("tar", "-x", "-C", root)
	untar.Stdin = rc
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	out, err := exec.Command("chroot", root, "/bin/sh", "-c", "ferry version && ls /tmp && id -u").CombinedOutput()
	if err != nil {
		t.Fatalf("running the image's shell: %v: %s", err, out)
	}
	if got := string(out); got != "ferry-in-image version\n0\n" {
		t.Errorf("got %q", got)
	}
}

func TestMissingBinaries(t *testing.T) {
	if _, err := Ferry(Options{}); err == nil || !strings.Contains(err.Error(), "no ferry binary") {
		t.Errorf("no ferry: got %v", err)
	}
	if _, err := Ferry(Options{Ferry: "/nonexistent/ferry"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/ferry") {
		t.Errorf("missing ferry: got %v", err)
	}
	if _, err := Busybox(Options{Busybox: "/nonexistent/busybox"}); err == nil || !strings.Contains(err.Error(), "busybox-static") {
		t.Errorf("missing busybox: got %v", err)
	}
	script := filepath.Join(t.TempDir(), "ferry")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Ferry(Options{Ferry: script}); err == nil || !strings.Contains(err.Error(), "not an ELF executable") {
		t.Errorf("a script as ferry: got %v", err)
	}
	if _, err := Ferry(Options{Ferry: "/bin/ls"}); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a dynamically linked ferry: got %v", err)
	}
}
