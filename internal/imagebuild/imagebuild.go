// Package imagebuild owns ferry's container images: the ferry image that the
// server, the node agent and the restore helper run (ferry's static binary
// and busybox-static with its applet links), and the small images the test
// nodes run (busybox, pause). It builds them with go-containerregistry from
// binaries on disk, with no Docker and nothing pulled: `make image`
// (hack/image) and internal/testenv use it.
//
// The layout is the one the repository's Dockerfile produces:
//
//	/bin/busybox                 busybox-static
//	/bin/<applet> -> busybox     one link per applet (busybox --install -s /bin)
//	/usr/local/bin/ferry         ferry, statically linked
//	/etc/passwd, /etc/group      root and nobody
//	/tmp                         mode 1777
//
// Entrypoint /usr/local/bin/ferry, PATH /usr/local/bin:/bin. Files carry a
// fixed time, so the same binaries give the same digest.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultBusybox is where Debian's busybox-static puts its binary.
const DefaultBusybox = "/bin/busybox"

// FerryPath is the ferry binary's path inside the ferry image.
const FerryPath = "/usr/local/bin/ferry"

// epoch is the time of every file in the images (reproducible digests).
var epoch = time.Unix(0, 0).UTC()

// Options name the binaries an image is built from.
type Options struct {
	// Ferry is the path of a statically linked ferry binary
	// (CGO_ENABLED=0 go build ./cmd/ferry). Required for Ferry images.
	Ferry string
	// Busybox is the path of a statically linked busybox; default
	// DefaultBusybox.
	Busybox string
	// Architecture of the binaries; default runtime.GOARCH.
	Architecture string
}

func (o Options) busybox() string {
	if o.Busybox == "" {
		return DefaultBusybox
	}
	return o.Busybox
}

func (o Options) arch() string {
	if o.Architecture == "" {
		return runtime.GOARCH
	}
	return o.Architecture
}

// Ferry builds the ferry image.
func Ferry(o Options) (v1.Image, error) {
	if o.Ferry == "" {
		return nil, errors.New("imagebuild: no ferry binary given")
	}
	files, err := busyboxFiles(o.busybox())
	if err != nil {
		return nil, err
	}
	if err := requireStatic(o.Ferry); err != nil {
		return nil, err
	}
	ferry, err := regularFile(o.Ferry, FerryPath)
	if err != nil {
		return nil, err
	}
	files = append(files, dir("/usr"), dir("/usr/local"), dir("/usr/local/bin"), ferry)
	return image(o.arch(), files, v1.Config{
		Entrypoint: []string{FerryPath},
		Env:        []string{"PATH=/usr/local/bin:/bin"},
		WorkingDir: "/",
	})
}

// Busybox builds an image of busybox-static alone (entrypoint /bin/sh), for
// test pods.
func Busybox(o Options) (v1.Image, error) {
	files, err := busyboxFiles(o.busybox())
	if err != nil {
		return nil, err
	}
	return image(o.arch(), files, v1.Config{
		Entrypoint: []string{"/bin/sh"},
		Env:        []string{"PATH=/bin"},
		WorkingDir: "/",
	})
}

// WithTool builds an image of busybox-static and one more static binary,
// installed as /usr/local/bin/NAME (entrypoint /bin/sh), for test pods
// that run a real program: etcd as the database a staged migration
// moves.
func WithTool(o Options, binary, name string) (v1.Image, error) {
	files, err := busyboxFiles(o.busybox())
	if err != nil {
		return nil, err
	}
	if err := requireStatic(binary); err != nil {
		return nil, err
	}
	tool, err := regularFile(binary, "/usr/local/bin/"+name)
	if err != nil {
		return nil, err
	}
	files = append(files, dir("/usr"), dir("/usr/local"), dir("/usr/local/bin"), tool)
	return image(o.arch(), files, v1.Config{
		Entrypoint: []string{"/bin/sh"},
		Env:        []string{"PATH=/usr/local/bin:/bin"},
		WorkingDir: "/",
	})
}

// Pause builds a pod sandbox image from a static binary that waits for a
// signal (entrypoint /pause).
func Pause(binary, arch string) (v1.Image, error) {
	f, err := regularFile(binary, "/pause")
	if err != nil {
		return nil, err
	}
	if arch == "" {
		arch = runtime.GOARCH
	}
	return image(arch, []file{f}, v1.Config{Entrypoint: []string{"/pause"}, WorkingDir: "/"})
}

// requireStatic refuses a file that is not an ELF executable, or one that
// names a dynamic loader (the image has no libc): build ferry with
// CGO_ENABLED=0.
func requireStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("imagebuild: %s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("imagebuild: %s is dynamically linked (the image has no libc): build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// file is one tar entry of an image's only layer.
type file struct {
	hdr  tar.Header
	data []byte
}

func dir(name string) file {
	return file{hdr: tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(name, "/") + "/", Mode: 0o755}}
}

func regularFile(src, dst string) (file, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return file{}, fmt.Errorf("imagebuild: %w", err)
	}
	return file{hdr: tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(dst, "/"), Mode: 0o755, Size: int64(len(data))}, data: data}, nil
}

// busyboxFiles are /bin/busybox, a link per applet it lists, /etc and /tmp.
func busyboxFiles(busybox string) ([]file, error) {
	bb, err := regularFile(busybox, "/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("%w (install Debian's busybox-static)", err)
	}
	applets, err := appletNames(busybox)
	if err != nil {
		return nil, err
	}
	files := []file{dir("/bin"), bb}
	for _, a := range applets {
		if a == "busybox" {
			continue
		}
		files = append(files, file{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}})
	}
	etc := map[string]string{
		"/etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"/etc/group":  "root:x:0:\nnobody:x:65534:\n",
	}
	files = append(files, dir("/etc"), dir("/root"))
	for _, name := range []string{"/etc/group", "/etc/passwd"} {
		files = append(files, file{hdr: tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(name, "/"), Mode: 0o644, Size: int64(len(etc[name]))}, data: []byte(etc[name])})
	}
	tmp := dir("/tmp")
	tmp.hdr.Mode = 0o1777
	return append(files, tmp), nil
}

// appletNames asks busybox which applets it has (busybox --list): the same
// list `busybox --install -s` links.
func appletNames(busybox string) ([]string, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("imagebuild: %s --list: %w", busybox, err)
	}
	var names []string
	for _, n := range strings.Fields(string(out)) {
		if n != "" && !strings.Contains(n, "/") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("imagebuild: %s --list printed no applets", busybox)
	}
	sort.Strings(names)
	return names, nil
}

// image is one layer of files with cfg, for linux/arch, as OCI media types.
func image(arch string, files []file, cfg v1.Config) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := f.hdr
		h.ModTime, h.Format = epoch, tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("imagebuild: %s: %w", path.Clean(h.Name), err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("imagebuild: %s: %w", path.Clean(h.Name), err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config, cf.Created = "linux", arch, cfg, v1.Time{Time: epoch}
	return mutate.ConfigFile(img, cf)
}
