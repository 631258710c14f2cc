// Command image builds ferry's container image (internal/imagebuild) from a
// static ferry binary and Debian's busybox-static, with go-containerregistry
// and no Docker, and pushes it to a registry or writes it as an OCI layout.
// `make image` runs it:
//
//	go run ./hack/image -ferry bin/linux/ferry -push registry.example:5000/ferry:dev
//	go run ./hack/image -ferry bin/linux/ferry -oci-layout bin/ferry-image
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeferry/ferry/internal/imagebuild"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var o imagebuild.Options
	var push, ociLayout string
	var insecure bool
	flag.StringVar(&o.Ferry, "ferry", "", "statically linked ferry binary (CGO_ENABLED=0)")
	flag.StringVar(&o.Busybox, "busybox", imagebuild.DefaultBusybox, "statically linked busybox (Debian's busybox-static)")
	flag.StringVar(&push, "push", "", "push the image to this reference (host/repository:tag)")
	flag.BoolVar(&insecure, "insecure", false, "push over plain HTTP (a registry without TLS)")
	flag.StringVar(&ociLayout, "oci-layout", "", "write the image as an OCI image layout in this directory")
	flag.Parse()
	if push != "" && ociLayout != "" {
		return errors.New("-push and -oci-layout: give one of them, not both")
	}
	if push == "" && ociLayout == "" {
		return errors.New("give -push REFERENCE (make image IMAGE=...) or -oci-layout DIR")
	}
	if o.Ferry == "" {
		return errors.New("-ferry: no ferry binary given")
	}
	var ref name.Reference
	if push != "" {
		var opts []name.Option
		if insecure {
			opts = append(opts, name.Insecure)
		}
		var err error
		if ref, err = name.ParseReference(push, opts...); err != nil {
			return fmt.Errorf("-push %q: %w (a registry without TLS: -insecure, IMAGE_INSECURE=1)", push, err)
		}
	}
	if ociLayout != "" {
		if err := replaceableLayout(ociLayout); err != nil {
			return err
		}
	}
	img, err := imagebuild.Ferry(o)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if ociLayout != "" {
		if err := os.RemoveAll(ociLayout); err != nil {
			return err
		}
		p, err := layout.Write(ociLayout, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img); err != nil {
			return err
		}
		fmt.Printf("%s@%s\n", ociLayout, digest)
		return nil
	}
	if err := remote.Write(ref, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	fmt.Printf("%s@%s\n", ref.Context(), digest)
	return nil
}

// replaceableLayout refuses to replace a directory that is not empty and
// not an OCI image layout (it would be removed whole).
func replaceableLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("-oci-layout %s: %w", dir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("-oci-layout %s: not empty and not an OCI image layout (no oci-layout file): refusing to replace it", dir)
	}
	return nil
}
