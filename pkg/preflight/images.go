package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/report"
)

// imageTimeout bounds the resolution of one image.
var imageTimeout = 30 * time.Second

// imageUse is one image reference as the target's pods will name it, the
// workloads that name it and the pull Secrets they pull it with.
type imageUse struct {
	ref     string
	users   []string
	secrets map[string]bool // "namespace/name"
	// namespace is the first workload's (its target namespace).
	namespace string
	// missing is set when the image is not in its registry (a blocker
	// already): the pull probe does not try it.
	missing bool
}

// checkImages resolves every image the move's workloads name, after the
// registry mappings (the source's reference, with ferry's own credentials,
// when the move copies images: spec.images copy or bundle; their bytes are
// counted for the estimate), from where ferry runs, with the pull Secrets the
// target's pods will pull it with (their imagePullSecrets and their
// ServiceAccount's, from the backup or the target) on top of ferry's own
// credentials. An image the registry has not is a blocker
// (ImagePullBackOff); one the pull Secrets do not open is a warning (the
// nodes may have credentials of their own); one without a build for a
// target node's OS and architecture is a blocker when no node's platform
// is built, else a warning. A registry ferry cannot reach is not checked,
// and says so.
func checkImages(ctx context.Context, e *env) {
	e.copied = &imageBytes{blobs: map[v1.Hash]int64{}}
	if e.o.Restore.Spec.PushImages {
		e.skip("image pulls: spec.pushImages pushes the backup's bundled images to the mapped registries, where they are not yet")
		return
	}
	uses := e.imageUses()
	e.uses = uses
	plats := e.nodePlatforms()
	unreachable := map[string][]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < imageWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(uses); i = int(next.Add(1) - 1) {
				u := uses[i]
				host := registryOf(e.queried(u.ref))
				mu.Lock()
				_, down := unreachable[host]
				mu.Unlock()
				if down {
					// One timeout of a registry is enough to say it is
					// unreachable from here: its other images wait no more.
					mu.Lock()
					unreachable[host] = append(unreachable[host], u.ref)
					mu.Unlock()
					continue
				}
				if e.checkImage(ctx, u, plats, &mu) {
					mu.Lock()
					unreachable[host] = append(unreachable[host], u.ref)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	hosts := make([]string, 0, len(unreachable))
	for h := range unreachable {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		e.skip("images of registry %s (%d): unreachable from where ferry runs, so not checked (the target's nodes may reach it)", h, len(unreachable[h]))
	}
	checkPulls(ctx, e)
}

// imageWorkers is how many images are resolved at once.
const imageWorkers = 8

// checkImage resolves one image use and adds its risks (under mu); it
// reports whether the registry could not be reached.
func (e *env) checkImage(ctx context.Context, u *imageUse, plats map[string]int, mu *sync.Mutex) (unreachable bool) {
	// With spec.images copy or bundle, ferry copies each image from the
	// source's registry with its own credentials; the target's reference
	// exists once it did.
	copying := e.o.Backup.Spec.Images == images.ModeCopy || e.o.Backup.Spec.Images == images.ModeBundle
	ref, kc := u.ref, e.o.Images.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	if copying {
		ref = e.queried(u.ref)
	} else {
		var err error
		if kc, err = e.keychain(ctx, u.secrets); err != nil {
			mu.Lock()
			e.add(report.Warning, "image", u.users, fmt.Sprintf("image %s: its pull Secrets cannot be read: %v", u.ref, err), "")
			mu.Unlock()
			return false
		}
	}
	opts := e.o.Images
	opts.Keychain = kc
	c := images.NewCopier(opts)
	ictx, cancel := context.WithTimeout(ctx, imageTimeout)
	desc, built, err := c.Describe(ictx, ref)
	if err == nil && len(built) == 0 {
		built, err = singlePlatform(desc)
	}
	if err == nil && copying {
		var r name.Reference
		if r, err = images.ParseReference(ref, e.o.Images.Insecure); err == nil {
			err = e.copied.add(r, desc)
		}
	}
	cancel()
	mu.Lock()
	defer mu.Unlock()
	var te *transport.Error
	switch {
	case err == nil:
		checkPlatforms(e, u, ref, built, plats)
	case errors.As(err, &te) && (te.StatusCode == http.StatusNotFound || hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode)) && copying:
		e.add(report.Blocker, "image", u.users, fmt.Sprintf("image %s is copied from %s, which is not in its registry: the copy fails, and the pods cannot pull it", u.ref, ref),
			"push the image to the source's registry, or fix spec.imageRegistryMappings")
	case errors.As(err, &te) && (te.StatusCode == http.StatusNotFound || hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode)):
		u.missing = true
		e.add(report.Blocker, "image", u.users, fmt.Sprintf("image %s is not in its registry: the pods cannot pull it (ImagePullBackOff)", u.ref),
			"push the image, or map its registry with spec.imageRegistryMappings (and spec.images copy to copy it there)")
	case errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) && copying:
		e.add(report.Blocker, "image", u.users, fmt.Sprintf("image %s: the registry refuses ferry's credentials for %s, so ferry cannot copy it", u.ref, ref),
			"log in to the source's registry where ferry runs (docker config file or credential helper)")
	case errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden):
		e.add(report.Warning, "image", u.users, fmt.Sprintf("image %s: the registry refuses the pull Secrets the pods name (%s), and ferry's own credentials: unless the target's nodes have credentials of their own, the pods cannot pull it", u.ref, secretList(u.secrets)),
			"add a pull Secret with access to the registry to the pods or their ServiceAccount in the target")
	case unreachableErr(err):
		return true
	default:
		// A registry that answered, but not with the image (a 429 or 5xx
		// after the retries, a manifest that does not parse): said, and
		// the registry's other images are still asked.
		e.add(report.Warning, "image", u.users, fmt.Sprintf("image %s could not be resolved from where ferry runs: %v", ref, err), "check the image and its registry")
	}
	return false
}

// queried is the reference the image check resolves for ref: its source
// when the move copies images, else ref.
func (e *env) queried(ref string) string {
	if e.o.Backup.Spec.Images == images.ModeCopy || e.o.Backup.Spec.Images == images.ModeBundle {
		return e.sourceRef(ref)
	}
	return ref
}

// registryOf is the registry of ref ("index.docker.io" for Docker Hub's
// short names), or ref itself when it does not parse.
func registryOf(ref string) string {
	r, err := name.ParseReference(ref)
	if err != nil {
		return ref
	}
	return r.Context().RegistryStr()
}

// unreachableErr reports whether err says the registry could not be
// reached or did not answer in time (a network error, a timeout), rather
// than an answer.
func unreachableErr(err error) bool {
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	return errors.As(err, &ne) || errors.As(err, &oe) || errors.As(err, &de) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// imageUses gathers the images of the move's workloads, one use per
// reference and set of pull Secrets: a pod that names no Secret must not
// pass on another's.
func (e *env) imageUses() []*imageUse {
	byRef := map[string]*imageUse{}
	for _, w := range e.c.workloads {
		secrets := map[string]bool{}
		for _, s := range w.spec.ImagePullSecrets {
			secrets[w.namespace+"/"+s.Name] = true
		}
		for _, s := range e.serviceAccountSecrets(w.namespace, w.spec.ServiceAccountName) {
			secrets[w.namespace+"/"+s] = true
		}
		for _, c := range slices.Concat(w.spec.InitContainers, w.spec.Containers) {
			if c.Name == v1alpha1.RestoreWaitContainer || c.Image == "" {
				continue
			}
			key := c.Image + "\x00" + secretList(secrets)
			u := byRef[key]
			if u == nil {
				u = &imageUse{ref: c.Image, secrets: secrets, namespace: w.namespace}
				byRef[key] = u
			}
			if !slices.Contains(u.users, w.objectName()) {
				u.users = append(u.users, w.objectName())
			}
		}
	}
	out := make([]*imageUse, 0, len(byRef))
	for _, u := range byRef {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].ref < out[j].ref || out[i].ref == out[j].ref && secretList(out[i].secrets) < secretList(out[j].secrets)
	})
	return out
}

// serviceAccountSecrets are the imagePullSecrets of ServiceAccount name
// (default "default") in ns: the move's, else the target's.
func (e *env) serviceAccountSecrets(ns, name string) []string {
	if name == "" {
		name = "default"
	}
	var names []string
	for _, sa := range objectsOf[corev1.ServiceAccount](e.c, "/ServiceAccount") {
		if sa.Namespace == ns && sa.Name == name {
			for _, s := range sa.ImagePullSecrets {
				names = append(names, s.Name)
			}
			return names
		}
	}
	for _, s := range e.t.serviceAccounts[ns+"/"+name].ImagePullSecrets {
		names = append(names, s.Name)
	}
	return names
}

// keychain is the pull Secrets' keychain (the move's Secrets, else the
// target's), then ferry's own.
func (e *env) keychain(ctx context.Context, secrets map[string]bool) (authn.Keychain, error) {
	base := e.o.Images.Keychain
	if base == nil {
		base = authn.DefaultKeychain
	}
	var list []corev1.Secret
	for key := range secrets {
		if u, ok := e.c.pullSecrets[key]; ok {
			var s corev1.Secret
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err == nil {
				list = append(list, s)
			}
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		s, err := e.t.cluster.Typed.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			list = append(list, *s)
		}
	}
	if len(list) == 0 {
		return base, nil
	}
	kc, err := kauth.NewFromPullSecrets(ctx, list)
	if err != nil {
		return nil, err
	}
	return authn.NewMultiKeychain(kc, base), nil
}

func secretList(s map[string]bool) string {
	if len(s) == 0 {
		return "none"
	}
	var out []string
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// singlePlatform is the platform of a single-platform image, from its
// config.
func singlePlatform(desc *remote.Descriptor) ([]string, error) {
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	p := cfg.OS + "/" + cfg.Architecture
	if cfg.Variant != "" {
		p += "/" + cfg.Variant
	}
	return []string{p}, nil
}

// nodePlatforms are the target nodes' "os/arch", with how many nodes
// have each.
func (e *env) nodePlatforms() map[string]int {
	out := map[string]int{}
	for _, n := range e.t.nodes {
		os, arch := n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture
		if os == "" {
			os, arch = n.Labels[corev1.LabelOSStable], n.Labels[corev1.LabelArchStable]
		}
		if os != "" && arch != "" {
			out[os+"/"+arch]++
		}
	}
	return out
}

// checkPlatforms compares the platforms image ref (u's, or its source
// when the move copies it) is built for with the target nodes'.
func checkPlatforms(e *env, u *imageUse, ref string, built []string, nodes map[string]int) {
	if len(nodes) == 0 {
		return
	}
	has := func(p string) bool {
		for _, b := range built {
			if b == p || strings.HasPrefix(b, p+"/") {
				return true
			}
		}
		return false
	}
	var missing []string
	covered := 0
	for p, n := range nodes {
		if has(p) {
			covered += n
		} else {
			missing = append(missing, fmt.Sprintf("%s (%d node(s))", p, n))
		}
	}
	if len(missing) == 0 {
		return
	}
	sort.Strings(missing)
	sev, what := report.Warning, "pods placed on those nodes fail to start (no matching manifest, or exec format error)"
	if covered == 0 {
		sev, what = report.Blocker, "no target node can run it (no matching manifest, or exec format error)"
	}
	e.add(sev, "image", u.users, fmt.Sprintf("image %s is built for %s, not for %s: %s", ref, strings.Join(built, ", "), strings.Join(missing, ", "), what),
		"use an image built for the target's platforms (a multi-platform index), or keep the pods off those nodes with a kubernetes.io/arch node selector")
}

func hasCode(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		if slices.Contains(codes, d.Code) {
			return true
		}
	}
	return false
}
