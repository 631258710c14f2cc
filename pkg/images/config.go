package images

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"
)

// Rule is one source-to-target entry of a sync, in image-syncer's terms:
//
//	host/ns/app                 every tag of the repository
//	host/ns/app:1.0,1.1         the listed tags
//	host/ns/app:/^v1\./         the tags matching a regular expression (RE2)
//	host/ns/app@sha256:<hex>    one manifest by digest
//
// Targets are repositories (each tag, or digest, is kept), or, for a
// single tag or digest source, a repository with a tag.
type Rule struct {
	Source  string
	Targets []string
}

// Config is a sync configuration file (YAML):
//
//	images:
//	  registry.a.com/shop/web: registry.b.com/shop/web
//	  registry.a.com/shop/api:1.0,1.1: registry.b.com/shop/api
//	  registry.a.com/shop/db:/^15\./: [registry.b.com/shop/db, registry.c.com/db]
//
// A target may be one string or a list. Rules are applied in source order.
type Config struct {
	Images map[string]any `json:"images"`
}

// ParseConfig parses a sync configuration file. Errors name the entry.
func ParseConfig(data []byte) ([]Rule, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("sync config: %w", err)
	}
	if len(c.Images) == 0 {
		return nil, fmt.Errorf("sync config: no entries under \"images\"")
	}
	var rules []Rule
	for src, v := range c.Images {
		r := Rule{Source: src}
		switch t := v.(type) {
		case string:
			r.Targets = []string{t}
		case []any:
			for _, e := range t {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("sync config: images[%q]: a target is %T, want a string", src, e)
				}
				r.Targets = append(r.Targets, s)
			}
		default:
			return nil, fmt.Errorf("sync config: images[%q]: target is %T, want a string or a list of strings", src, v)
		}
		if len(r.Targets) == 0 {
			return nil, fmt.Errorf("sync config: images[%q]: no target", src)
		}
		if _, err := parseSource(src); err != nil {
			return nil, fmt.Errorf("sync config: %w", err)
		}
		rules = append(rules, r)
	}
	sort.Slice(rules, func(i, j int) bool { return rules[i].Source < rules[j].Source })
	return rules, nil
}

// source is a parsed Rule.Source.
type source struct {
	repo   string // repository as written
	tags   []string
	regex  *regexp.Regexp
	digest string
}

func parseSource(s string) (source, error) {
	s = strings.TrimSpace(s)
	if repo, d, ok := strings.Cut(s, "@"); ok {
		if _, err := name.NewDigest(s); err != nil {
			return source{}, fmt.Errorf("source %q: %w", s, err)
		}
		if t, _ := SplitTagDigest(s); t != "" {
			repo = repo[:len(repo)-len(t)-1]
		}
		return source{repo: repo, digest: d}, nil
	}
	if i := strings.Index(s, ":/"); i > 0 && strings.HasSuffix(s, "/") && len(s) > i+3 {
		re, err := regexp.Compile(s[i+2 : len(s)-1])
		if err != nil {
			return source{}, fmt.Errorf("source %q: tag regex: %w", s, err)
		}
		if _, err := name.NewRepository(s[:i]); err != nil {
			return source{}, fmt.Errorf("source %q: %w", s, err)
		}
		return source{repo: s[:i], regex: re}, nil
	}
	repo := s
	if tag, _ := SplitTagDigest(s); tag != "" {
		repo = s[:len(s)-len(tag)-1]
		for _, t := range strings.Split(tag, ",") {
			if _, err := name.NewTag(repo + ":" + strings.TrimSpace(t)); err != nil {
				return source{}, fmt.Errorf("source %q: tag %q: %w", s, t, err)
			}
		}
		src := source{repo: repo}
		for _, t := range strings.Split(tag, ",") {
			src.tags = append(src.tags, strings.TrimSpace(t))
		}
		return src, nil
	}
	if _, err := name.NewRepository(repo); err != nil {
		return source{}, fmt.Errorf("source %q: %w", s, err)
	}
	return source{repo: repo}, nil
}

// referrerTag matches the tags that name a digest: cosign's artifacts
// (sha256-<hex>.sig, .att, .sbom) and the referrers tag schema's index
// (sha256-<hex>).
var referrerTag = regexp.MustCompile(`^sha256-[0-9a-f]{64}(\.(sig|att|sbom))?$`)

// Expand turns rules into copy tasks, listing the tags of repositories
// (all tags, or a tag regex) at their registries. The tags of
// referrers are not images of their own: they go with their subjects
// (Options.Referrers). A rule whose tags
// cannot be listed gives a failed Result naming the repository; the
// other rules still expand.
func (c *Copier) Expand(ctx context.Context, rules []Rule) ([]Task, []Result) {
	var tasks []Task
	var failed []Result
	for _, r := range rules {
		src, err := parseSource(r.Source)
		if err != nil {
			failed = append(failed, Result{Source: r.Source, Outcome: Failed, Error: err.Error()})
			continue
		}
		var refs []string // source references with their tag or digest suffix
		switch {
		case src.digest != "":
			refs = []string{"@" + src.digest}
		case len(src.tags) > 0:
			for _, t := range src.tags {
				refs = append(refs, ":"+t)
			}
		default:
			tags, err := c.listTags(ctx, src.repo)
			if err != nil {
				failed = append(failed, Result{Source: r.Source, Outcome: Failed, Error: err.Error()})
				continue
			}
			for _, t := range tags {
				if referrerTag.MatchString(t) {
					continue // a referrer: it travels with its subject, or not at all
				}
				if src.regex == nil || src.regex.MatchString(t) {
					refs = append(refs, ":"+t)
				}
			}
			if len(refs) == 0 {
				failed = append(failed, Result{Source: r.Source, Outcome: Failed, Error: fmt.Sprintf("repository %s: no tag matches", src.repo)})
				continue
			}
		}
		for _, tgt := range r.Targets {
			tgtTag, tgtDigest := SplitTagDigest(tgt)
			if tgtDigest != "" {
				failed = append(failed, Result{Source: r.Source, Target: tgt, Outcome: Failed, Error: fmt.Sprintf("target %q: a target is a repository or repository:tag, not a digest", tgt)})
				continue
			}
			if tgtTag != "" && len(refs) > 1 {
				failed = append(failed, Result{Source: r.Source, Target: tgt, Outcome: Failed, Error: fmt.Sprintf("target %q names a tag, but the source %q has %d tags", tgt, r.Source, len(refs))})
				continue
			}
			for _, ref := range refs {
				target := tgt + ref
				if tgtTag != "" {
					target = tgt
				}
				tasks = append(tasks, Task{Source: src.repo + ref, Target: target})
			}
		}
	}
	return tasks, failed
}

// listTags lists the tags of repo, sorted.
func (c *Copier) listTags(ctx context.Context, repo string) ([]string, error) {
	var opts []name.Option
	if c.opts.Insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.NewRepository(repo, opts...)
	if err != nil {
		return nil, fmt.Errorf("repository %q: %w", repo, err)
	}
	var retries, sent atomic.Int64
	tags, err := remote.List(r, c.remoteOptions(ctx, &retries, &sent)...)
	if err != nil {
		return nil, explain(repo, "source", err)
	}
	sort.Strings(tags)
	return tags, nil
}
