package images

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Options configure copies between registries.
type Options struct {
	// Platforms, if set, keeps only these platforms of an image index
	// ("linux/amd64"; a platform without variant matches every variant).
	// The per-platform manifests keep their digests; the index is a new
	// one, with a new digest. Single-platform images are copied as they are.
	Platforms []v1.Platform
	// Concurrency is the number of images copied at once (default 4).
	Concurrency int
	// Jobs is the number of blobs of one image moved at once (default 4).
	Jobs int
	// Insecure allows plain-HTTP (and unverified TLS) registries.
	Insecure bool
	// Keychain resolves credentials (default authn.DefaultKeychain: the
	// docker config file and its credential helpers).
	Keychain authn.Keychain
	// Transport is the HTTP transport under retries and counting
	// (default remote.DefaultTransport).
	Transport http.RoundTripper
	// Retry bounds the retries of each request (default DefaultRetry).
	Retry RetryPolicy
	// IdleTimeout bounds how long a registry may stay silent: waiting for
	// a response's headers, or between two reads of a response body
	// (default DefaultIdleTimeout). A registry that accepts connections
	// and never answers fails the image, naming it, instead of hanging.
	IdleTimeout time.Duration
	// OnProgress, if set, is called as an image's blobs move: bytes
	// complete of total (total is 0 until known).
	OnProgress func(t Task, complete, total int64)
	// Referrers chooses the referrers (signatures, attestations, SBOMs)
	// that travel with each image; the zero value is all of them.
	Referrers ReferrerFilter
	// Limits bound the requests to each registry (by host[:port]); the
	// entry "*" bounds every registry without its own.
	Limits map[string]Limit
	// OnWait, if set, is called when a registry answers 429 with a
	// Retry-After and ferry waits.
	OnWait func(host string, wait time.Duration)
}

// Task is one copy: a source reference (tag or digest) to a target
// reference in another repository.
type Task struct {
	Source, Target string
}

// Outcome of one image copy.
type Outcome string

// Outcomes: Copied (the manifest was written), Present (the target
// already had the manifest by digest; nothing was sent), Failed.
const (
	Copied  Outcome = "copied"
	Present Outcome = "present"
	Failed  Outcome = "failed"
)

// Result is the outcome of one Task. BlobBytes counts the blob bytes sent
// to the target (0 when every blob was already there or was mounted);
// Retries counts retried requests. Error holds the registry's error.
type Result struct {
	Source    string   `json:"source"`
	Target    string   `json:"target"`
	Outcome   Outcome  `json:"outcome"`
	Digest    string   `json:"digest,omitempty"`
	MediaType string   `json:"mediaType,omitempty"`
	Platforms []string `json:"platforms,omitempty"`
	BlobBytes int64    `json:"blobBytes"`
	Retries   int64    `json:"retries"`
	// Waits counts the 429 answers whose Retry-After ferry waited out,
	// and WaitSeconds adds up their waits (the image's requests wait side
	// by side, so it can pass the image's own time).
	Waits       int64   `json:"waits,omitempty"`
	WaitSeconds float64 `json:"waitSeconds,omitempty"`
	Error       string  `json:"error,omitempty"`
	// Referrers are the image's referrers and what became of each.
	Referrers []Referrer `json:"referrers,omitempty"`
	// Seconds is the wall time of this copy.
	Seconds float64 `json:"seconds"`
}

// Copier copies images between registries with go-containerregistry's
// remote package: remote.Write and remote.WriteIndex check which blobs and
// manifests the target has (HEAD) and mount blobs across repositories of
// the same registry.
type Copier struct {
	opts   Options
	base   http.RoundTripper
	polite *politeTransport
	mounts mounts
	// tagLists caches each source repository's sha256- tags (cosign's).
	tagLists sync.Map
	// referrersAPI caches whether a registry serves the referrers API.
	referrersAPI sync.Map
	// fetched holds the referrers' manifests fetched while finding them,
	// until the copy takes them ("repo@digest").
	fetched sync.Map
	// subjectLocks serializes the writes of the OCI referrers of one
	// subject in one target repository across the images of a run
	// ("repo@digest" -> *sync.Mutex).
	subjectLocks sync.Map
	// putManifests holds the digest each manifest PUT was answered with
	// (Docker-Content-Digest; "" without it), by URL, until the writer
	// takes it (manifestPutKey): a write needs no HEAD to learn whether
	// it happened and what the registry stored.
	putManifests sync.Map
	// prefetched holds the prefetch of each task CopyAll copies, until
	// its copy takes it (Task -> *prefetch).
	prefetched sync.Map
	// typesFound are the artifact types of the referrers found, chosen
	// by the filter or not (UnmatchedTypes).
	typesFound sync.Map
}

// NewCopier returns a Copier with opts' defaults filled in.
func NewCopier(opts Options) *Copier {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.Jobs <= 0 {
		opts.Jobs = 4
	}
	if opts.Keychain == nil {
		opts.Keychain = authn.DefaultKeychain
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	base := opts.Transport
	if base == nil {
		base = remote.DefaultTransport
	}
	if t, ok := base.(*http.Transport); ok && t.ResponseHeaderTimeout == 0 {
		t = t.Clone()
		t.ResponseHeaderTimeout = opts.IdleTimeout
		if t.TLSHandshakeTimeout == 0 || t.TLSHandshakeTimeout > opts.IdleTimeout {
			t.TLSHandshakeTimeout = opts.IdleTimeout
		}
		base = t
	}
	if opts.Insecure {
		if t, ok := base.(*http.Transport); ok {
			t = t.Clone()
			if t.TLSClientConfig != nil {
				t.TLSClientConfig.InsecureSkipVerify = true
			} else {
				t.TLSClientConfig = insecureTLS()
			}
			base = t
		}
	}
	polite := newPoliteTransport(&idleTransport{inner: base, idle: opts.IdleTimeout}, opts.Limits, opts.OnWait)
	return &Copier{opts: opts, base: &pingCache{inner: polite}, polite: polite}
}

// ParseReference parses s, allowing plain HTTP when insecure.
func ParseReference(s string, insecure bool) (name.Reference, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(s, opts...)
	if err != nil {
		return nil, fmt.Errorf("image %q: malformed reference: %w", s, err)
	}
	return ref, nil
}

// remoteOptions are the options of one operation; n counts its retries
// and sent counts its uploaded blob bytes.
func (c *Copier) remoteOptions(ctx context.Context, retries, sent *atomic.Int64) []remote.Option {
	tr := http.RoundTripper(&countingTransport{inner: c.base, n: sent, manifests: &c.putManifests})
	o := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(c.opts.Keychain), remote.WithTransport(tr), remote.WithJobs(c.opts.Jobs)}
	o = append(o, c.opts.Retry.options(retries)...)
	// One operation's requests share their authenticated transports (one
	// ping and token per repository, not one per call).
	if pl, err := remote.NewPuller(o...); err == nil {
		o = append(o, remote.Reuse(pl))
	}
	if ps, err := remote.NewPusher(o...); err == nil {
		o = append(o, remote.Reuse(ps))
	}
	return o
}

// Describe resolves ref at its registry: digest, media type and, for an
// index, the platforms it holds. The error names the image.
func (c *Copier) Describe(ctx context.Context, ref string) (*remote.Descriptor, []string, error) {
	var retries, sent atomic.Int64
	r, err := ParseReference(ref, c.opts.Insecure)
	if err != nil {
		return nil, nil, err
	}
	desc, err := get(r, c.remoteOptions(ctx, &retries, &sent))
	if err != nil {
		return nil, nil, explain(ref, "source", err)
	}
	plats, err := platforms(desc)
	if err != nil {
		return nil, nil, explain(ref, "source", err)
	}
	return desc, plats, nil
}

// again runs f, the copy of one whole image, and runs it again (up to
// the retry policy's attempts, with its backoff) when it fails on a
// transient error that the per-request retries could not absorb: a
// connection reset or an early EOF in the middle of a streamed blob,
// whose request cannot be replayed because its body is a stream from the
// source. Blobs already at the target are not sent again. Each rerun is
// counted in retries and in Retries.
func (c *Copier) again(ctx context.Context, retries *atomic.Int64, f func() error) error {
	p := c.opts.Retry
	if p.Attempts <= 0 {
		p = DefaultRetry
	}
	wait := p.Initial
	var err error
	for attempt := 1; ; attempt++ {
		err = f()
		if err == nil || attempt >= p.Attempts || ctx.Err() != nil || !midStream(err) {
			return err
		}
		retries.Add(1)
		retriesTotal.Add(1)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
		if wait *= 2; wait > p.Max {
			wait = p.Max
		}
	}
}

// midStream reports a failure of the connection itself (reset, broken
// pipe, early EOF, a timeout), as opposed to an answer of the registry or
// the store (a 4xx, a digest mismatch), which a rerun would not change.
func midStream(err error) bool {
	if retryable(err) {
		return true
	}
	s := err.Error()
	for _, m := range []string{"connection reset", "broken pipe", "unexpected EOF", "i/o timeout", "503 Service Unavailable", "Service Unavailable"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// get fetches ref's manifest verified against its digest. A tag is
// first resolved to the digest the registry names for it (HEAD,
// Docker-Content-Digest), then fetched by that digest, which
// go-containerregistry checks against the content: a registry serving a
// manifest that does not hash to its digest is refused. A registry that
// answers HEAD without a digest is read by tag.
func get(ref name.Reference, opts []remote.Option) (*remote.Descriptor, error) {
	if _, ok := ref.(name.Tag); ok {
		head, err := remote.Head(ref, opts...)
		if err != nil {
			var te *transport.Error
			if errors.As(err, &te) || isNetError(err) {
				return nil, err
			}
			return remote.Get(ref, opts...)
		}
		desc, err := remote.Get(ref.Context().Digest(head.Digest.String()), opts...)
		if err != nil {
			return nil, fmt.Errorf("tag %s names %s: %w", ref, head.Digest, err)
		}
		return desc, nil
	}
	return remote.Get(ref, opts...)
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// platforms lists the platforms of an index descriptor, nested indexes
// included (nil for an image).
func platforms(desc *remote.Descriptor) ([]string, error) {
	if !desc.MediaType.IsIndex() {
		return nil, nil
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, err
	}
	return indexPlatforms(idx)
}

// Copy copies one image or index. It never panics on registry errors:
// a failure is a Result with Outcome Failed and the registry's error,
// naming the image.
func (c *Copier) Copy(ctx context.Context, t Task) Result {
	start := time.Now()
	res := Result{Source: t.Source, Target: t.Target}
	var retries, sent atomic.Int64
	// A prefetch's waits are the image's: one Retry-After budget.
	pre := c.takePrefetch(ctx, t)
	w := &waits{}
	if pre != nil {
		w = pre.w
	}
	ctx = context.WithValue(ctx, waitsKey{}, w)
	first := pre
	err := c.again(ctx, &retries, func() error {
		p := first
		first = nil // a rerun fetches afresh
		return c.copy(ctx, t, p, &res, &retries, &sent)
	})
	res.Retries, res.BlobBytes = retries.Load(), sent.Load()
	res.Waits, res.WaitSeconds = w.count(), w.seconds()
	if pre != nil { // its requests, the blobs' reads among them, were the image's
		res.Retries += pre.retries.Load()
	}
	res.Seconds = time.Since(start).Seconds()
	if err != nil {
		res.Outcome = Failed
		res.Error = err.Error() + c.rateLimitNotes(err, t.Source, t.Target)
	}
	return res
}

// rateLimitNotes adds the Docker Hub limits the registries of refs
// last answered to an error of a rate-limited copy.
func (c *Copier) rateLimitNotes(err error, refs ...string) string {
	var te *transport.Error
	if !errors.As(err, &te) || te.StatusCode != http.StatusTooManyRequests {
		return ""
	}
	out := ""
	for _, ref := range refs {
		if r, perr := name.ParseReference(ref); perr == nil {
			out += c.rateLimitNote(r.Context().RegistryStr())
		}
	}
	return out
}

func (c *Copier) copy(ctx context.Context, t Task, pre *prefetch, res *Result, retries, sent *atomic.Int64) error {
	src, err := ParseReference(t.Source, c.opts.Insecure)
	if err != nil {
		return err
	}
	dst, err := ParseReference(t.Target, c.opts.Insecure)
	if err != nil {
		return fmt.Errorf("copy %s: target: %w", t.Source, err)
	}
	// The image's manifest waits for its referrers' lookup (find).
	ctx, gate := withGate(ctx, dst)
	opts := c.remoteOptions(ctx, retries, sent)
	var desc *remote.Descriptor
	var it *item
	switch {
	case pre != nil && pre.err != nil:
		return explain(t.Source, "source", pre.err) // not asked again: a rerun does, if it may
	case pre != nil:
		desc, it = pre.desc, pre.it
	default:
		if desc, it, err = c.fetch(ctx, src, opts); err != nil {
			return explain(t.Source, "source", err)
		}
	}
	var refs []Referrer
	find := func() ([]Referrer, error) {
		var err error
		refs, err = c.referrersToCopy(ctx, t.Source, src.Context(), desc.Digest, it, opts)
		gate.open(err)
		return refs, err
	}
	if it.digest != desc.Digest {
		// A platform filter made a new index: the referrers decide whether
		// it may be written at all.
		if _, err := find(); err != nil {
			return err
		}
		found := refs
		find = func() ([]Referrer, error) { return found, nil }
	}
	// The referrers' writes have transports of their own.
	refOpts := c.remoteOptions(ctx, retries, sent)
	defer func() { c.letGo(src.Context(), refs) }() // those the target had were not taken
	return c.putWithReferrers(ctx, t, dst, it, find, c.openRemote(src.Context(), refOpts), opts, refOpts, sent, res)
}

// putWithReferrers writes the image and its referrers side by side (a
// referrer needs nothing of its subject at the registry): find lists the
// referrers (at the source, while the image's blobs move), and they are
// written as they are found.
func (c *Copier) putWithReferrers(ctx context.Context, t Task, dst name.Reference, it *item, find func() ([]Referrer, error), open func(Referrer) (artifact, error), opts, refOpts []remote.Option, sent *atomic.Int64, res *Result) error {
	var refErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		refs, err := find()
		if err != nil {
			refErr = err
			return
		}
		if len(refs) > 0 {
			if res.Referrers, err = c.putReferrers(ctx, dst.Context(), refs, open, refOpts); err != nil {
				refErr = fmt.Errorf("image %s: %w", t.Source, err)
			}
		}
	}()
	err := c.put(t, dst, it, opts, sent, res)
	wg.Wait()
	switch {
	case err != nil && refErr != nil && errors.Is(err, errManifestHeld):
		return refErr // the lookup failed, and the manifest waited for it
	case err != nil:
		return err
	}
	return refErr
}

// referrersToCopy finds the referrers of the image fetched as root
// (it after the platform filter) in repo. A filter that made a new
// index while referrers name the old one, or a nested index it rebuilt,
// is refused: they would be lost, and a policy that checks signatures
// would refuse the image.
func (c *Copier) referrersToCopy(ctx context.Context, image string, repo name.Repository, root v1.Hash, it *item, opts []remote.Option) ([]Referrer, error) {
	if c.opts.Referrers.None {
		return nil, nil
	}
	subs, err := subjects(it, root)
	if err != nil {
		return nil, explain(image, "source", err)
	}
	refs, err := c.findReferrers(ctx, repo, subs, opts)
	if err != nil {
		return nil, explain(image, "source", err)
	}
	if it.digest == root {
		return refs, nil
	}
	lost, err := c.lostReferrers(ctx, repo, root, it, refs, opts)
	if err != nil {
		c.letGo(repo, refs)
		return nil, explain(image, "source", err)
	}
	if lost != "" {
		c.letGo(repo, refs) // no copy follows
		return nil, fmt.Errorf("image %s: keeping only some platforms makes a new index, %s instead of %s%s: copy the whole index (no platform filter), or leave the referrers behind (referrers none)", image, it.digest, root, lost)
	}
	return refs, nil
}

// lostReferrers names the referrers a platform filter would leave
// behind: those of the index it replaced, root (found among refs), and
// those of each nested index it rebuilt (it.rebuilt, looked up here).
// "" when there are none.
func (c *Copier) lostReferrers(ctx context.Context, repo name.Repository, root v1.Hash, it *item, refs []Referrer, opts []remote.Option) (string, error) {
	named := func(rs []Referrer, subject string) []string {
		var out []string
		for _, r := range rs {
			if r.Subject == subject {
				out = append(out, fmt.Sprintf("%s (%s)", r.Digest, orType(r.ArtifactType)))
			}
		}
		return out
	}
	lost := ""
	if n := named(refs, root.String()); len(n) > 0 {
		lost = ", and " + nameReferrers(n) + " the old one"
	}
	if len(it.rebuilt) == 0 {
		return lost, nil
	}
	theirs, err := c.findReferrers(ctx, repo, it.rebuilt, opts)
	if err != nil {
		return "", err
	}
	c.letGo(repo, theirs) // none of them is copied
	for _, h := range it.rebuilt {
		if n := named(theirs, h.String()); len(n) > 0 {
			lost += fmt.Sprintf("; it rebuilds the nested index %s too, and %s it", h, nameReferrers(n))
		}
	}
	return lost, nil
}

// nameReferrers says which referrers name something: "its referrer X
// names" or "its 3 referrers X, Y, Z name".
func nameReferrers(named []string) string {
	if len(named) == 1 {
		return "its referrer " + named[0] + " names"
	}
	return fmt.Sprintf("its %d referrers %s name", len(named), strings.Join(named, ", "))
}

// CopyAll copies tasks with c's concurrency. Results come back in the
// order of tasks; onResult, if set, is called as each finishes. A failed
// image never stops the others. A task given twice runs once; tasks of
// one target from different sources fail, naming each other (one would
// overwrite the other).
func (c *Copier) CopyAll(ctx context.Context, tasks []Task, onResult func(Result)) []Result {
	out := make([]Result, len(tasks))
	canonical := func(ref string) string { // nginx:1 and docker.io/library/nginx:1 are one
		if r, err := name.ParseReference(ref); err == nil {
			return r.Name()
		}
		return ref
	}
	sources := map[string][]string{} // by target, its sources (canonical)
	for _, t := range tasks {
		k, src := canonical(t.Target), canonical(t.Source)
		if !slices.Contains(sources[k], src) {
			sources[k] = append(sources[k], src)
		}
	}
	sem := make(chan struct{}, c.opts.Concurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	report := func(r Result) {
		if onResult != nil {
			mu.Lock()
			onResult(r)
			mu.Unlock()
		}
	}
	first := map[string]int{}
	var dups [][2]int // a task given again, and its first
	for i, t := range tasks {
		key := canonical(t.Source) + " " + canonical(t.Target)
		if j, ok := first[key]; ok {
			dups = append(dups, [2]int{i, j})
			continue
		}
		first[key] = i
		if others := sources[canonical(t.Target)]; len(others) > 1 {
			src := canonical(t.Source)
			out[i] = Result{Source: t.Source, Target: t.Target, Outcome: Failed,
				Error: fmt.Sprintf("copy %s: %s is the target of %s too: one would overwrite the other", t.Source, t.Target, strings.Join(slices.DeleteFunc(slices.Clone(others), func(s string) bool { return s == src }), ", "))}
			report(out[i])
			continue
		}
		wg.Add(1)
		c.prefetch(ctx, t) // while the images before it copy
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = c.Copy(ctx, t)
			report(out[i])
		}()
	}
	wg.Wait()
	for _, d := range dups {
		r := out[d[1]] // the same copy: its bytes, retries and waits count once
		r.Source, r.Target = tasks[d[0]].Source, tasks[d[0]].Target
		r.BlobBytes, r.Retries, r.Waits, r.WaitSeconds, r.Referrers = 0, 0, 0, 0, nil
		out[d[0]] = r
		report(r)
	}
	return out
}

// ParsePlatforms parses "os/arch[/variant]" entries (comma-separated
// entries allowed).
func ParsePlatforms(entries []string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, e := range entries {
		for _, s := range strings.Split(e, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			p, err := v1.ParsePlatform(s)
			if err != nil || p.OS == "" || p.Architecture == "" {
				return nil, fmt.Errorf("platform %q: want os/arch[/variant], like linux/amd64", s)
			}
			out = append(out, *p)
		}
	}
	if len(out) == 0 && len(entries) > 0 {
		return nil, fmt.Errorf("platform %q: names no platform; want os/arch[/variant], like linux/amd64", strings.Join(entries, ","))
	}
	return out, nil
}

// explain wraps a registry error with the image and a plain reason.
func explain(ref, side string, err error) error {
	reason := ""
	var te *transport.Error
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden):
		reason = "access denied: check the credentials (docker config file or credential helper)"
	case errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
		reason = "not found"
	case errors.As(err, &te) && te.StatusCode == http.StatusTooManyRequests:
		reason = "rate limited: the registry answered 429 Too Many Requests after every retry"
	case strings.Contains(err.Error(), "is damaged"):
		reason = "damaged: stored content does not hash to its digest"
	case strings.Contains(err.Error(), "does not match"), strings.Contains(err.Error(), "error verifying sha256 checksum"):
		reason = "digest mismatch: content that does not hash to its digest"
	case errors.As(err, &oe), errors.As(err, &ne):
		reason = side + " registry unreachable"
	}
	if reason != "" {
		return fmt.Errorf("image %s: %s: %w", ref, reason, err)
	}
	return fmt.Errorf("image %s: %w", ref, err)
}

// SortResults orders results by source then target.
func SortResults(rs []Result) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Source != rs[j].Source {
			return rs[i].Source < rs[j].Source
		}
		return rs[i].Target < rs[j].Target
	})
}
