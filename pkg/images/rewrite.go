package images

import (
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Mapping maps image references under one registry or repository prefix
// to another (spec.imageRegistryMappings entries, old-host/ns=new-host/ns). A From
// without a slash is a whole registry ("old-host" or "old-host:5000");
// with one, a repository prefix matched on path-segment boundaries:
// "old/ns" matches old/ns/app but not old/ns2/app. From is compared in
// go-containerregistry's normalized form, so "docker.io/library" also
// matches "nginx", and with the registry host in lower case (hosts are
// case-insensitive, RFC 4343).
type Mapping struct {
	From, To string
	// from is From normalized (registry, or registry/repository, with
	// Docker Hub spelled index.docker.io); registry tells which.
	from     string
	registry bool
}

// ParseMapping parses "FROM=TO". Both sides must parse as a registry
// (no slash) or repository, and neither may carry a tag or digest.
func ParseMapping(s string) (Mapping, error) {
	from, to, ok := strings.Cut(strings.TrimSpace(s), "=")
	from, to = strings.TrimSuffix(strings.TrimSpace(from), "/"), strings.TrimSuffix(strings.TrimSpace(to), "/")
	if !ok || from == "" || to == "" {
		return Mapping{}, fmt.Errorf("image registry mapping %q: want OLD=NEW, each a registry (host[:port]) or repository prefix (host/namespace)", s)
	}
	m := Mapping{From: from, To: to}
	var err error
	if m.from, m.registry, err = normalizePrefix(from); err != nil {
		return Mapping{}, fmt.Errorf("image registry mapping %q: %q: %w", s, from, err)
	}
	if _, _, err := normalizePrefix(to); err != nil {
		return Mapping{}, fmt.Errorf("image registry mapping %q: %q: %w", s, to, err)
	}
	return m, nil
}

// ParseMappings parses each entry of entries, which may also hold several
// comma-separated mappings. A From mapped twice to different targets is an error.
func ParseMappings(entries []string) ([]Mapping, error) {
	var out []Mapping
	seen := map[string]string{}
	for _, e := range entries {
		for _, s := range strings.Split(e, ",") {
			if strings.TrimSpace(s) == "" {
				continue
			}
			m, err := ParseMapping(s)
			if err != nil {
				return nil, err
			}
			if prev, dup := seen[m.from]; dup && prev != m.To {
				return nil, fmt.Errorf("image registry mapping: %s is mapped twice (%s and %s)", m.From, prev, m.To)
			}
			seen[m.from] = m.To
			out = append(out, m)
		}
	}
	return out, nil
}

func normalizePrefix(s string) (norm string, registry bool, err error) {
	if strings.ContainsAny(s, "@") {
		return "", false, fmt.Errorf("a mapping names a registry or repository, not a digest")
	}
	if !strings.Contains(s, "/") {
		r, err := name.NewRegistry(s)
		if err != nil {
			return "", false, err
		}
		return strings.ToLower(r.RegistryStr()), true, nil
	}
	last := s[strings.LastIndex(s, "/")+1:]
	if strings.Contains(last, ":") {
		return "", false, fmt.Errorf("a mapping names a registry or repository, not a tag")
	}
	if _, err := name.NewRepository(s); err != nil {
		return "", false, err
	}
	// The path as written: name.NewRepository would turn a one-segment
	// Docker Hub prefix ("docker.io/library") into "library/library".
	first, rest, _ := strings.Cut(s, "/")
	if !strings.ContainsAny(first, ".:") && first != "localhost" {
		return name.DefaultRegistry + "/" + s, false, nil
	}
	reg, err := name.NewRegistry(first)
	if err != nil {
		return "", false, err
	}
	return strings.ToLower(reg.RegistryStr()) + "/" + rest, false, nil
}

// Rewriter rewrites image references by a list of mappings; the longest
// matching From wins. Digests maps an original reference (as written in
// the pod spec) to the digest it resolved to at backup time
// ("sha256:<64 hex>"); a rewritten reference without a digest is pinned
// to it.
type Rewriter struct {
	mappings []Mapping
	Digests  map[string]string
}

// NewRewriter returns a Rewriter over mappings, most specific first.
func NewRewriter(mappings []Mapping, digests map[string]string) *Rewriter {
	ms := append([]Mapping(nil), mappings...)
	sort.SliceStable(ms, func(i, j int) bool { return len(ms[i].from) > len(ms[j].from) })
	return &Rewriter{mappings: ms, Digests: digests}
}

// Empty reports whether the rewriter has no mappings.
func (r *Rewriter) Empty() bool { return r == nil || len(r.mappings) == 0 }

// Rewrite maps one reference. It keeps the tag, keeps a digest, and pins
// the known digest (Digests) when the reference has none:
// "old/ns/app:1.2" with old/ns=new/ns becomes "new/ns/app:1.2@sha256:...".
// A reference no mapping matches is returned unchanged with changed false.
// A malformed reference, or a result that does not parse, is an error
// naming the reference.
func (r *Rewriter) Rewrite(ref string) (out string, changed bool, err error) {
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return ref, false, fmt.Errorf("image %q: malformed reference: %w", ref, err)
	}
	repo := parsed.Context()
	// Hosts are case-insensitive (DNS); repository paths are lowercase.
	host := strings.ToLower(repo.RegistryStr())
	full := host + "/" + repo.RepositoryStr()
	var target string
	for _, m := range r.mappings {
		if m.registry {
			if host == m.from {
				target = m.To + "/" + repo.RepositoryStr()
			}
		} else if full == m.from {
			target = m.To
		} else if strings.HasPrefix(full, m.from+"/") {
			target = m.To + full[len(m.from):]
		}
		if target != "" {
			break
		}
	}
	if target == "" {
		return ref, false, nil
	}
	tag, digest := SplitTagDigest(ref)
	if tag != "" {
		target += ":" + tag
	}
	if recorded := r.Digests[ref]; recorded != "" {
		// What the backup copied or bundled: with Options.Platforms, the
		// filtered index, whose digest differs from the one written.
		digest = recorded
	}
	if digest != "" {
		target += "@" + digest
	}
	if _, err := name.ParseReference(target); err != nil {
		return ref, false, fmt.Errorf("image %q: mapped to %q, which is not a valid reference: %w", ref, target, err)
	}
	return target, target != ref, nil
}

// SplitTagDigest returns the tag and digest written in ref ("" for none);
// an implicit "latest" is not a tag.
func SplitTagDigest(ref string) (tag, digest string) {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, digest = ref[:i], ref[i+1:]
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		tag = last[i+1:]
	}
	return tag, digest
}
