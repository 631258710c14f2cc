package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Referrer is an artifact that refers to an image's manifest by digest:
// a signature, an attestation or an SBOM. It is either an OCI 1.1
// referrer (a manifest whose subject is the image: listed by the
// registry's referrers API, or by the referrers tag schema's index
// tagged sha256-<hex> where the registry has no such API) or one of
// cosign's tag-based artifacts (Tag: sha256-<hex>.sig, .att or .sbom).
// Referrers of referrers (a signature of an SBOM) are referrers too,
// with the referrer as their subject.
type Referrer struct {
	// Subject is the digest of the manifest it refers to: the image, one
	// of an index's manifests, or another referrer.
	Subject   string `json:"subject"`
	Digest    string `json:"digest"`
	MediaType string `json:"mediaType"`
	// ArtifactType is the OCI artifactType (or, without one, the config's
	// media type); for a cosign tag, the media type of its first layer.
	ArtifactType string `json:"artifactType,omitempty"`
	Size         int64  `json:"size"`
	// Tag is the cosign tag it is found under; empty for an OCI referrer.
	Tag string `json:"tag,omitempty"`
	// Outcome and Error are those of its copy or push (empty in a record
	// of what was found).
	Outcome Outcome `json:"outcome,omitempty"`
	Error   string  `json:"error,omitempty"`
	// checked: its write found the target's digest equal (a HEAD, or the
	// registry's answer to the PUT).
	checked bool
}

// cosignSuffixes are the tag suffixes of cosign's tag-based artifacts.
var cosignSuffixes = []string{"sig", "att", "sbom"}

// maxReferrerDepth bounds referrers of referrers (a signature of an
// attestation of an image is depth 2).
const maxReferrerDepth = 4

// ReferrerFilter chooses the referrers that travel with an image: all of
// them (the zero value), none, or those of some artifact types.
type ReferrerFilter struct {
	None  bool
	Types []string
}

// ParseReferrers parses "all", "none" or artifact types (media types,
// comma-separated entries allowed).
func ParseReferrers(entries []string) (ReferrerFilter, error) {
	var f ReferrerFilter
	var words []string
	for _, e := range entries {
		for _, s := range strings.Split(e, ",") {
			if s = strings.TrimSpace(s); s != "" {
				words = append(words, s)
			}
		}
	}
	if len(words) == 0 && len(entries) > 0 {
		return f, fmt.Errorf("%q: names nothing; want all, none, or artifact types", strings.Join(entries, ","))
	}
	for _, w := range words {
		switch {
		case w == "all" || w == "none":
			if len(words) > 1 {
				return f, fmt.Errorf("%q: all and none stand alone", strings.Join(words, ","))
			}
			f.None = w == "none"
		case strings.Count(w, "/") != 1 || strings.HasPrefix(w, "/") || strings.HasSuffix(w, "/") || strings.ContainsAny(w, " \t"):
			return f, fmt.Errorf("%q: want all, none, or artifact types (media types like application/spdx+json)", w)
		default:
			f.Types = append(f.Types, w)
		}
	}
	return f, nil
}

// String is the filter as ParseReferrers reads it.
func (f ReferrerFilter) String() string {
	switch {
	case f.None:
		return "none"
	case len(f.Types) == 0:
		return "all"
	}
	return strings.Join(f.Types, ",")
}

// Wants reports whether the filter chooses referrers of artifactType.
func (f ReferrerFilter) Wants(artifactType string) bool { return f.wants(artifactType) }

// SignatureTypes are the artifact types of signatures: cosign's (simple
// signing under its .sig tag, and its OCI 1.1 referrer), sigstore
// bundles and Notation's.
var SignatureTypes = []string{"application/vnd.dev.cosign.simplesigning.v1+json", "application/vnd.dev.cosign.artifact.sig.v1+json", "application/vnd.dev.sigstore.bundle.v0.3+json", "application/vnd.cncf.notary.signature"}

// KeepsSignatures says whether the filter chooses signatures (of one of
// SignatureTypes at least): what a policy that verifies them needs.
func (f ReferrerFilter) KeepsSignatures() bool {
	for _, t := range SignatureTypes {
		if f.wants(t) {
			return true
		}
	}
	return false
}

func (f ReferrerFilter) wants(artifactType string) bool {
	if f.None {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if t == artifactType {
			return true
		}
	}
	return false
}

// subjects are the digests whose referrers belong to an image: its own,
// and those of the manifests of an index (nested indexes included).
func subjects(it *item, root v1.Hash) ([]v1.Hash, error) {
	out := []v1.Hash{root}
	if it.idx == nil {
		return out, nil
	}
	var walk func(idx v1.ImageIndex) error
	walk = func(idx v1.ImageIndex) error {
		im, err := idx.IndexManifest()
		if err != nil {
			return err
		}
		for _, d := range im.Manifests {
			out = append(out, d.Digest)
			if d.MediaType.IsIndex() {
				child, err := idx.ImageIndex(d.Digest)
				if err != nil {
					return fmt.Errorf("nested index %s: %w", d.Digest, err)
				}
				if err := walk(child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(it.idx)
}

// findReferrers lists the referrers of subs in repo that c's filter
// wants, and theirs, breadth first (a subject before its referrers).
// cosign's tags are found in one list of the repository's tags.
func (c *Copier) findReferrers(ctx context.Context, repo name.Repository, subs []v1.Hash, opts []remote.Option) ([]Referrer, error) {
	if c.opts.Referrers.None {
		return nil, nil
	}
	tags, err := c.sha256Tags(ctx, repo, opts)
	if err != nil {
		return nil, fmt.Errorf("listing the tags of %s for cosign's signatures: %w", repo, err)
	}
	type subject struct {
		h     v1.Hash
		depth int
	}
	var queue []subject
	for _, h := range subs {
		queue = append(queue, subject{h, 0})
	}
	var out []Referrer
	seen := map[string]bool{}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		found, err := c.referrersOf(ctx, repo, s.h, tags, opts)
		if err != nil {
			c.letGo(repo, out)
			return nil, fmt.Errorf("referrers of %s: %w", s.h, err)
		}
		for _, r := range found {
			c.typesFound.Store(r.ArtifactType, true)
			if seen[r.Digest+" "+r.Tag] || !c.opts.Referrers.wants(r.ArtifactType) {
				if !seen[r.Digest+" "+r.Tag] {
					c.letGo(repo, []Referrer{r})
				}
				continue
			}
			seen[r.Digest+" "+r.Tag] = true
			out = append(out, r)
			if h, err := v1.NewHash(r.Digest); err == nil && s.depth+1 < maxReferrerDepth {
				queue = append(queue, subject{h, s.depth + 1})
			}
		}
	}
	return out, nil
}

// letGo drops the manifests of refs kept in c.fetched for a copy that
// will not take them.
func (c *Copier) letGo(repo name.Repository, refs []Referrer) {
	for _, r := range refs {
		c.fetched.Delete(repo.Digest(r.Digest).String())
	}
}

// UnmatchedTypes are the artifact types of the referrer filter that no
// referrer found by c's copies has, and the types they have: a type
// misspelt in a filter would otherwise leave every referrer behind
// without a word. Both are empty without a type filter.
func (c *Copier) UnmatchedTypes() (unmatched, found []string) {
	if len(c.opts.Referrers.Types) == 0 {
		return nil, nil
	}
	has := map[string]bool{}
	c.typesFound.Range(func(k, _ any) bool {
		has[k.(string)] = true
		found = append(found, orType(k.(string)))
		return true
	})
	for _, t := range c.opts.Referrers.Types {
		if !has[t] {
			unmatched = append(unmatched, t)
		}
	}
	sort.Strings(found)
	return unmatched, found
}

// tagList is one repository's sha256- tags, listed once per Copier: a
// sync of many tags of one repository lists its tags once.
type tagList struct {
	once sync.Once
	tags map[string]bool
	err  error
}

func (c *Copier) sha256Tags(ctx context.Context, repo name.Repository, opts []remote.Option) (map[string]bool, error) {
	v, _ := c.tagLists.LoadOrStore(repo.String(), &tagList{})
	l := v.(*tagList)
	l.once.Do(func() { l.tags, l.err = sha256Tags(ctx, repo, opts) })
	if l.err != nil {
		c.tagLists.Delete(repo.String()) // a later image may list them again
	}
	return l.tags, l.err
}

// sha256Tags are the tags of repo that name a digest (cosign's and the
// referrers tag schema's); a repository the registry does not know has
// none.
func sha256Tags(ctx context.Context, repo name.Repository, opts []remote.Option) (map[string]bool, error) {
	all, err := remote.List(repo, append(opts, remote.WithContext(ctx))...)
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
		return map[string]bool{}, nil
	}
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return nil, nil // may pull, not list: each subject's tags are asked for
	}
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, t := range all {
		if strings.HasPrefix(t, "sha256-") {
			out[t] = true
		}
	}
	return out, nil
}

// referrersOf lists the referrers of one subject: the OCI 1.1 referrers
// (the referrers API, or the referrers tag schema's index where the
// registry has no API: the tag sha256-<hex>, looked for in tags) and
// cosign's tags. The manifests of the cosign tags are kept for the copy.
func (c *Copier) referrersOf(ctx context.Context, repo name.Repository, h v1.Hash, tags map[string]bool, opts []remote.Option) ([]Referrer, error) {
	var out []Referrer
	api, err := c.hasReferrersAPI(ctx, repo, h)
	if err != nil {
		return nil, err
	}
	var im *v1.IndexManifest
	switch {
	case api:
		idx, err := remote.Referrers(repo.Digest(h.String()), opts...)
		if err != nil {
			return nil, err
		}
		if im, err = idx.IndexManifest(); err != nil {
			return nil, err
		}
	case tags == nil || tags["sha256-"+h.Hex]:
		idx, err := remote.Index(repo.Tag("sha256-"+h.Hex), opts...)
		var te *transport.Error
		switch {
		case tags == nil && errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
			im = &v1.IndexManifest{} // none (the tags could not be listed)
		case err != nil:
			return nil, fmt.Errorf("the referrers tag schema's index sha256-%s: %w", h.Hex, err)
		default:
			if im, err = idx.IndexManifest(); err != nil {
				return nil, err
			}
		}
	default:
		im = &v1.IndexManifest{}
	}
	for _, d := range im.Manifests {
		out = append(out, Referrer{Subject: h.String(), Digest: d.Digest.String(), MediaType: string(d.MediaType), ArtifactType: d.ArtifactType, Size: d.Size})
	}
	for _, suffix := range cosignSuffixes {
		tag := "sha256-" + h.Hex + "." + suffix
		if tags != nil && !tags[tag] {
			continue
		}
		desc, err := remote.Get(repo.Tag(tag), opts...)
		var te *transport.Error
		if tags == nil && errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
			continue // no such tag (the tags could not be listed)
		}
		if err != nil {
			return nil, fmt.Errorf("tag %s: %w", tag, err)
		}
		c.fetched.Store(repo.Digest(desc.Digest.String()).String(), desc)
		out = append(out, Referrer{Subject: h.String(), Digest: desc.Digest.String(), MediaType: string(desc.MediaType), ArtifactType: cosignType(desc.Manifest, suffix), Size: desc.Size, Tag: tag})
	}
	return out, nil
}

// hasReferrersAPI reports whether repo's registry serves the referrers
// API (asked once per registry, as go-containerregistry asks: a 200 with
// an OCI index; a registry without it answers 404).
func (c *Copier) hasReferrersAPI(ctx context.Context, repo name.Repository, h v1.Hash) (bool, error) {
	if v, ok := c.referrersAPI.Load(repo.RegistryStr()); ok {
		return v.(bool), nil
	}
	auth, err := authn.Resolve(ctx, c.opts.Keychain, repo)
	if err != nil {
		return false, err
	}
	tr, err := transport.NewWithContext(ctx, repo.Registry, auth, c.base, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return false, err
	}
	u := url.URL{Scheme: repo.Scheme(), Host: repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/referrers/%s", repo.RepositoryStr(), h)}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", string(types.OCIImageIndex))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusOK, http.StatusNotFound, http.StatusBadRequest, http.StatusNotAcceptable); err != nil {
		return false, err
	}
	api := resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == string(types.OCIImageIndex)
	c.referrersAPI.Store(repo.RegistryStr(), api)
	return api, nil
}

// cosignType is the media type of a cosign artifact's first layer
// (application/vnd.dev.cosign.simplesigning.v1+json for a signature,
// application/vnd.dsse.envelope.v1+json for an attestation).
func cosignType(raw []byte, suffix string) string {
	var m struct {
		Layers []struct {
			MediaType string `json:"mediaType"`
		} `json:"layers"`
	}
	if json.Unmarshal(raw, &m) == nil && len(m.Layers) > 0 && m.Layers[0].MediaType != "" {
		return m.Layers[0].MediaType
	}
	return "application/vnd.dev.cosign." + suffix
}

// artifact is a referrer's content: an image manifest or an index.
type artifact struct {
	img v1.Image
	idx v1.ImageIndex
}

// putReferrers writes refs into dst, each fetched by open, unless dst
// has it (by digest, and for an OCI referrer listed under its subject),
// then checks that every one is there: each at its digest (a cosign tag
// naming it), each OCI referrer listed under its subject. The OCI
// referrers of one subject are written one at a time (the tag schema's
// index is read, changed and written back); the rest go Options.Jobs at
// once. It returns refs with their outcomes; the error names the first
// (in refs' order) that failed.
func (c *Copier) putReferrers(ctx context.Context, dst name.Repository, refs []Referrer, open func(Referrer) (artifact, error), opts []remote.Option) ([]Referrer, error) {
	out := append([]Referrer(nil), refs...)
	l := &listings{dst: dst, opts: opts, by: map[string]map[string]bool{}}
	groups := map[string][]int{}
	var keys []string
	for i, r := range out {
		k := "tag " + r.Tag
		if r.Tag == "" {
			k = "subject " + r.Subject
		}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	errs := make([]error, len(out)) // each failed one's, kept for its type (a 429's notes)
	c.parallel(ctx, len(keys), func(g int) {
		for _, i := range groups[keys[g]] {
			if errs[i] = c.putReferrer(ctx, dst, &out[i], open, l, opts); errs[i] != nil {
				out[i].Outcome, out[i].Error = Failed, errs[i].Error()
			}
			l.forget(out[i].Subject) // listed again when checked
		}
	})
	c.parallel(ctx, len(out), func(i int) {
		if out[i].Outcome == Failed {
			return
		}
		if errs[i] = checkReferrer(ctx, dst, &out[i], l, opts); errs[i] != nil {
			out[i].Outcome, out[i].Error = Failed, errs[i].Error()
		}
	})
	for i, r := range out {
		if r.Outcome == Failed {
			return out, fmt.Errorf("referrer %s (%s) of %s: %w", r.Digest, orType(r.ArtifactType), r.Subject, errs[i])
		}
	}
	if err := ctx.Err(); err != nil { // those not begun have no outcome
		return out, fmt.Errorf("referrers: %w", err)
	}
	return out, nil
}

// parallel runs f(0..n-1), Options.Jobs at once.
func (c *Copier) parallel(ctx context.Context, n int, f func(int)) {
	sem := make(chan struct{}, c.opts.Jobs)
	var wg sync.WaitGroup
	for i := 0; i < n && ctx.Err() == nil; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

// listings are the referrers a target lists under each subject, read
// once until forgotten.
type listings struct {
	dst  name.Repository
	opts []remote.Option
	mu   sync.Mutex
	by   map[string]map[string]bool
}

func (l *listings) list(subject string) (map[string]bool, error) {
	l.mu.Lock()
	got, ok := l.by[subject]
	l.mu.Unlock()
	if ok {
		return got, nil
	}
	idx, err := remote.Referrers(l.dst.Digest(subject), l.opts...)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	got = map[string]bool{}
	for _, d := range im.Manifests {
		got[d.Digest.String()] = true
	}
	l.mu.Lock()
	l.by[subject] = got
	l.mu.Unlock()
	return got, nil
}

func (l *listings) forget(subject string) {
	l.mu.Lock()
	delete(l.by, subject)
	l.mu.Unlock()
}

func orType(t string) string {
	if t == "" {
		return "no artifact type"
	}
	return t
}

func (c *Copier) putReferrer(ctx context.Context, dst name.Repository, r *Referrer, open func(Referrer) (artifact, error), l *listings, opts []remote.Option) error {
	var ref name.Reference = dst.Digest(r.Digest)
	if r.Tag != "" {
		ref = dst.Tag(r.Tag)
	}
	head, herr := remote.Head(ref, opts...)
	if herr == nil && r.Tag != "" && head.Digest.String() != r.Digest {
		return fmt.Errorf("the target's tag %s names its own %s: not overwritten (it may be the target's own signature); remove it to copy the source's", r.Tag, head.Digest)
	}
	relist := false // at the target by digest, not listed under its subject
	if herr == nil && head.Digest.String() == r.Digest {
		r.checked = true
		if r.Tag != "" {
			r.Outcome = Present
			return nil
		}
		listed, err := l.list(r.Subject)
		if err != nil {
			return fmt.Errorf("listing the referrers of %s at the target: %w", r.Subject, err)
		}
		if listed[r.Digest] {
			r.Outcome = Present
			return nil
		}
		relist = true
	}
	a, err := open(*r)
	if err != nil {
		return err
	}
	if r.Tag == "" {
		// The tag schema's index of the subject is read, changed and
		// written back: one writer at a time.
		mu, _ := c.subjectLocks.LoadOrStore(dst.String()+"@"+r.Subject, &sync.Mutex{})
		mu.(*sync.Mutex).Lock()
		defer mu.(*sync.Mutex).Unlock()
	}
	key := manifestPutKey(ref)
	c.putManifests.Delete(key)
	switch {
	case relist && a.idx != nil:
		// go-containerregistry writes nothing the registry has: the
		// manifest is put again, which lists it under its subject (the
		// tag schema's index) where the registry does not.
		err = remote.Put(ref, a.idx, opts...)
	case relist:
		err = remote.Put(ref, a.img, opts...)
	case a.idx != nil:
		err = remote.WriteIndex(ref, a.idx, opts...)
		c.forgetPuts(dst, a.idx)
	default:
		err = remote.Write(ref, a.img, opts...)
	}
	// A registry without the referrers API gets the subject's tag
	// schema index from go-containerregistry.
	c.putManifests.Delete(manifestPutKey(dst.Tag(strings.Replace(r.Subject, ":", "-", 1))))
	stored, _ := c.putManifests.LoadAndDelete(key)
	if err != nil {
		return explain(ref.String(), "target", err)
	}
	// The registry's answer to the PUT names what it stored; checked
	// again (HEAD) only when it does not.
	if got, _ := stored.(string); got != "" {
		if got != r.Digest {
			return fmt.Errorf("the target stored %s as %s: the registry changed the manifest, and what refers to it names the digest", r.Digest, got)
		}
		r.checked = true
	}
	r.Outcome = Copied
	return nil
}

// forgetPuts drops the PUT answers of idx's manifests, which
// go-containerregistry wrote by digest into dst and nobody asks for.
func (c *Copier) forgetPuts(dst name.Repository, idx v1.ImageIndex) {
	im, err := idx.IndexManifest()
	if err != nil {
		return
	}
	for _, d := range im.Manifests {
		c.putManifests.Delete(manifestPutKey(dst.Digest(d.Digest.String())))
		if d.MediaType.IsIndex() {
			if child, err := idx.ImageIndex(d.Digest); err == nil {
				c.forgetPuts(dst, child)
			}
		}
	}
}

// checkReferrer checks that r is in dst at its digest and, for an OCI
// referrer, listed under its subject.
func checkReferrer(ctx context.Context, dst name.Repository, r *Referrer, l *listings, opts []remote.Option) error {
	var ref name.Reference = dst.Digest(r.Digest)
	if r.Tag != "" {
		ref = dst.Tag(r.Tag)
	}
	if !r.checked { // neither its HEAD nor its PUT's answer named the digest
		head, err := remote.Head(ref, append(append([]remote.Option(nil), opts...), remote.WithContext(ctx))...)
		if err != nil {
			return fmt.Errorf("not at the target after the copy: %w", err)
		}
		if head.Digest.String() != r.Digest {
			return fmt.Errorf("the target names %s %s, not %s: the registry changed the manifest, and what refers to it names the digest", ref, head.Digest, r.Digest)
		}
	}
	if r.Tag != "" {
		return nil
	}
	listed, err := l.list(r.Subject)
	if err != nil {
		return fmt.Errorf("listing the referrers of %s at the target: %w", r.Subject, err)
	}
	if !listed[r.Digest] {
		return fmt.Errorf("at the target, but not listed under %s (referrers API or tag %s)", r.Subject, strings.Replace(r.Subject, ":", "-", 1))
	}
	return nil
}

// openRemote opens referrers from repo by digest (a cosign tag's
// manifest as its discovery fetched it).
func (c *Copier) openRemote(repo name.Repository, opts []remote.Option) func(Referrer) (artifact, error) {
	return func(r Referrer) (artifact, error) {
		ref := repo.Digest(r.Digest)
		var desc *remote.Descriptor
		if v, ok := c.fetched.LoadAndDelete(ref.String()); ok {
			desc = v.(*remote.Descriptor)
		} else {
			var err error
			if desc, err = remote.Get(ref, opts...); err != nil {
				return artifact{}, explain(ref.String(), "source", err)
			}
		}
		if desc.MediaType.IsIndex() {
			idx, err := desc.ImageIndex()
			return artifact{idx: idx}, err
		}
		img, err := desc.Image()
		return artifact{img: img}, err
	}
}

// ReferrersOf lists the referrers of ref's manifest (and of an index's
// manifests) at its registry, as c's filter chooses them: what the
// verification compares with what the backup recorded.
func (c *Copier) ReferrersOf(ctx context.Context, ref string) ([]Referrer, error) {
	var retries, sent atomic.Int64
	r, err := ParseReference(ref, c.opts.Insecure)
	if err != nil {
		return nil, err
	}
	opts := c.remoteOptions(ctx, &retries, &sent)
	desc, err := get(r, opts)
	if err != nil {
		return nil, explain(ref, "target", err)
	}
	it, err := unfiltered(desc)
	if err != nil {
		return nil, explain(ref, "target", err)
	}
	subs, err := subjects(it, desc.Digest)
	if err != nil {
		return nil, explain(ref, "target", err)
	}
	refs, err := c.findReferrers(ctx, r.Context(), subs, opts)
	c.letGo(r.Context(), refs) // no copy follows
	return refs, err
}
