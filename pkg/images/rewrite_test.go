package images

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

const dg = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestRewrite(t *testing.T) {
	ms, err := ParseMappings([]string{"old.example.com/shop=new.example.com:5000/mirror/shop", "Old.Example.com=reg.other.io", "docker.io/library=hub.mirror.io/lib"})
	if err != nil {
		t.Fatal(err)
	}
	filtered := "sha256:" + strings.Repeat("f", 64)
	rw := NewRewriter(ms, map[string]string{"old.example.com/shop/web:1.2": dg, "old.example.com/shop/multi:1@" + dg: filtered, "old.example.com/shop/multi@" + dg: filtered})
	for _, tc := range []struct{ in, want string }{
		// Longest prefix wins, tag kept, known digest pinned.
		{"old.example.com/shop/web:1.2", "new.example.com:5000/mirror/shop/web:1.2@" + dg},
		// No known digest: tag only.
		{"old.example.com/shop/api:3", "new.example.com:5000/mirror/shop/api:3"},
		// A digest in the reference is kept.
		{"old.example.com/shop/api@" + dg, "new.example.com:5000/mirror/shop/api@" + dg},
		{"old.example.com/shop/api:3@" + dg, "new.example.com:5000/mirror/shop/api:3@" + dg},
		// A recorded digest wins over the one written: with --platform the
		// backup copied a filtered index, whose digest is its own.
		{"old.example.com/shop/multi:1@" + dg, "new.example.com:5000/mirror/shop/multi:1@" + filtered},
		{"old.example.com/shop/multi@" + dg, "new.example.com:5000/mirror/shop/multi@" + filtered},
		// Registry-wide mapping.
		{"old.example.com/other/x:9", "reg.other.io/other/x:9"},
		// Segment boundary: shop2 is not under shop.
		{"old.example.com/shop2/x:1", "reg.other.io/shop2/x:1"},
		// Docker Hub short names are normalized before matching.
		{"nginx:1.7.9", "hub.mirror.io/lib/nginx:1.7.9"},
		{"busybox", "hub.mirror.io/lib/busybox"},
		// Registry hosts are case-insensitive (DNS): the mapping matches a
		// reference that spells the host otherwise.
		{"OLD.Example.com/shop/api:3", "new.example.com:5000/mirror/shop/api:3"},
		{"Old.Example.COM/other/x:9", "reg.other.io/other/x:9"},
		// Not matching: unchanged.
		{"quay.io/prometheus/node-exporter:v1", "quay.io/prometheus/node-exporter:v1"},
		{"bitnami/redis:7", "bitnami/redis:7"},
	} {
		got, changed, err := rw.Rewrite(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got != tc.want || changed != (tc.in != tc.want) {
			t.Errorf("Rewrite(%q) = %q, %v; want %q", tc.in, got, changed, tc.want)
		}
	}
	if _, _, err := rw.Rewrite("Old.Example.com/UPPER:x"); err == nil || !strings.Contains(err.Error(), `"Old.Example.com/UPPER:x"`) {
		t.Errorf("malformed reference: err = %v, want one naming the image", err)
	}
}

func TestParseMappingErrors(t *testing.T) {
	for _, s := range []string{"", "old", "=new", "old=", "old/ns:tag=new/ns", "old/ns=new/ns@" + dg, "old/NS=new/ns"} {
		if _, err := ParseMapping(s); err == nil {
			t.Errorf("ParseMapping(%q): no error", s)
		}
	}
	if _, err := ParseMappings([]string{"a.io/x=b.io/x,a.io/x=c.io/x"}); err == nil {
		t.Error("a From mapped twice: no error")
	}
}

func TestSplitTagDigest(t *testing.T) {
	for _, tc := range []struct{ in, tag, digest string }{
		{"host:5000/app", "", ""},
		{"host:5000/app:1", "1", ""},
		{"app@" + dg, "", dg},
		{"host:5000/ns/app:v2@" + dg, "v2", dg},
	} {
		tag, d := SplitTagDigest(tc.in)
		if tag != tc.tag || d != tc.digest {
			t.Errorf("SplitTagDigest(%q) = %q, %q", tc.in, tag, d)
		}
	}
}

// FuzzRewrite checks the rewriter's contract on any input: no panic; a
// reference that does not parse is an error; an unchanged result is the
// input itself; a changed one parses, keeps the tag and the digest.
func FuzzRewrite(f *testing.F) {
	f.Add("old.example.com/shop/web:1.2", "old.example.com/shop", "new.example.com/shop")
	f.Add("nginx", "docker.io", "mirror:5000")
	f.Add("a/b@"+dg, "index.docker.io/a", "x.io/y")
	f.Fuzz(func(t *testing.T, ref, from, to string) {
		m, err := ParseMapping(from + "=" + to)
		if err != nil {
			return
		}
		rw := NewRewriter([]Mapping{m}, map[string]string{ref: dg})
		out, changed, err := rw.Rewrite(ref)
		if _, perr := name.ParseReference(ref); perr != nil {
			if err == nil {
				t.Fatalf("Rewrite(%q): malformed reference accepted", ref)
			}
			return
		}
		if err != nil {
			if !strings.Contains(err.Error(), ref) {
				t.Fatalf("error %q does not name %q", err, ref)
			}
			return
		}
		if !changed {
			if out != ref {
				t.Fatalf("unchanged but %q != %q", out, ref)
			}
			return
		}
		if _, err := name.ParseReference(out); err != nil {
			t.Fatalf("Rewrite(%q) = %q, which does not parse: %v", ref, out, err)
		}
		tag, d := SplitTagDigest(ref)
		otag, od := SplitTagDigest(out)
		if otag != tag {
			t.Fatalf("Rewrite(%q) = %q: tag %q lost", ref, out, tag)
		}
		// The recorded digest is pinned, also over one written in the
		// reference (with --platform the backup copied a filtered index).
		if od != dg {
			t.Fatalf("Rewrite(%q) = %q: digest %q (written %q), want the recorded %q", ref, out, od, d, dg)
		}
		if !strings.HasPrefix(out, m.To) {
			t.Fatalf("Rewrite(%q) = %q, not under %q", ref, out, m.To)
		}
	})
}
