package archive

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func writeTestArchive(t *testing.T) ([]byte, Summary) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	items := []struct {
		e    Entry
		data string
	}{
		{Entry{Resource: "configmaps", Version: "v1", Kind: "ConfigMap", Namespace: "demo", Name: "a"}, `{"kind":"ConfigMap","data":{"k":"v"}}`},
		{Entry{Group: "apps", Resource: "deployments", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}, `{"kind":"Deployment"}`},
		{Entry{Resource: "namespaces", Version: "v1", Kind: "Namespace", Name: "demo"}, `{"kind":"Namespace"}`},
	}
	for _, it := range items {
		if err := w.WriteItem(it.e, []byte(it.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteItem(items[0].e, []byte("{}")); err == nil {
		t.Fatal("writing one path twice succeeded")
	}
	sum, err := w.Close(Manifest{BackupName: "b"})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum
}

func expect(s Summary) Expect {
	return Expect{Size: s.Size, SHA256: s.SHA256, ManifestSHA256: s.ManifestSHA256}
}

func TestRoundTrip(t *testing.T) {
	data, sum := writeTestArchive(t)
	a, err := Read(bytes.NewReader(data), "k", expect(sum))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Items) != 3 || sum.Entries != 3 {
		t.Fatalf("got %d items (summary %d), want 3", len(a.Items), sum.Entries)
	}
	paths := map[string]string{}
	for _, it := range a.Items {
		paths[it.Path] = string(it.Data)
	}
	for p, want := range map[string]string{
		"resources/configmaps/namespaces/demo/a.json":         `{"kind":"ConfigMap","data":{"k":"v"}}`,
		"resources/deployments.apps/namespaces/demo/web.json": `{"kind":"Deployment"}`,
		"resources/namespaces/cluster/demo.json":              `{"kind":"Namespace"}`,
	} {
		if paths[p] != want {
			t.Errorf("%s = %q, want %q", p, paths[p], want)
		}
	}
	if a.Version != FormatVersion || a.Manifest.BackupName != "b" {
		t.Errorf("version %q manifest %+v", a.Version, a.Manifest)
	}
}

func TestTruncated(t *testing.T) {
	data, sum := writeTestArchive(t)
	_, err := Read(bytes.NewReader(data[:len(data)/2]), "backups/b/b.tar.gz", expect(sum))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), "backups/b/b.tar.gz") {
		t.Fatalf("err = %v, want a truncation error naming the archive", err)
	}
	// Without the commit's size and digest, the gzip stream itself tells.
	if _, err := Read(bytes.NewReader(data[:len(data)/2]), "k", Expect{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}

func TestEveryByteFlipIsCaught(t *testing.T) {
	data, sum := writeTestArchive(t)
	for i := 0; i < len(data); i++ {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x01
		if _, err := Read(bytes.NewReader(bad), "k", expect(sum)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at byte %d of %d: err = %v, want ErrCorrupt", i, len(data), err)
		}
	}
}

func TestManifestMismatch(t *testing.T) {
	good, _ := writeTestArchive(t)
	_, other := writeTestArchive(t) // written a moment later: another manifest
	// The manifest's own digest is checked against the commit.
	if _, err := Read(bytes.NewReader(good), "k", Expect{ManifestSHA256: other.ManifestSHA256}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a manifest other than the committed one was accepted: %v", err)
	}
	// An archive whose entry was replaced after the manifest was written:
	// the good archive's manifest over a changed entry.
	ga, err := Read(bytes.NewReader(good), "k", Expect{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, _ := NewWriter(&buf)
	_ = w.WriteItem(Entry{Resource: "configmaps", Namespace: "demo", Name: "a"}, []byte(`{"kind":"ConfigMap","data":{"k":"EVIL"}}`))
	_ = w.WriteItem(Entry{Group: "apps", Resource: "deployments", Namespace: "demo", Name: "web"}, []byte(`{"kind":"Deployment"}`))
	_ = w.WriteItem(Entry{Resource: "namespaces", Name: "demo"}, []byte(`{"kind":"Namespace"}`))
	w.entries = nil
	for _, it := range ga.Items {
		w.entries = append(w.entries, it.Entry)
	}
	if _, err := w.Close(Manifest{BackupName: "b"}); err != nil {
		t.Fatal(err)
	}
	_, err = Read(bytes.NewReader(buf.Bytes()), "k", Expect{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "resources/configmaps/namespaces/demo/a.json") {
		t.Fatalf("err = %v, want a mismatch naming the entry", err)
	}
}

func TestParseItemPath(t *testing.T) {
	cases := map[string][4]string{
		"resources/pods/namespaces/ns/p.json":                                {"pods", "", "ns", "p"},
		"resources/deployments.apps/v1-preferredversion/namespaces/n/d.json": {"deployments.apps", "v1-preferredversion", "n", "d"},
		"resources/namespaces/cluster/kube-system.json":                      {"namespaces", "", "", "kube-system"},
	}
	for p, want := range cases {
		gr, v, ns, name, ok := ParseItemPath(p)
		if !ok || [4]string{gr, v, ns, name} != want {
			t.Errorf("ParseItemPath(%q) = %v %v %v %v %v, want %v", p, gr, v, ns, name, ok, want)
		}
	}
	if _, _, _, _, ok := ParseItemPath("metadata/version"); ok {
		t.Error("metadata/version parsed as an item")
	}
}

func TestParseManifestRejects(t *testing.T) {
	for name, in := range map[string]string{
		"not json":       `{`,
		"wrong version":  `{"formatVersion":"9.9.9","entries":[]}`,
		"no digest":      `{"formatVersion":"1.1.0","entries":[{"path":"resources/x/cluster/a.json","sha256":""}]}`,
		"duplicate path": `{"formatVersion":"1.1.0","entries":[{"path":"a","sha256":"` + strings.Repeat("0", 64) + `"},{"path":"a","sha256":"` + strings.Repeat("0", 64) + `"}]}`,
	} {
		if _, err := ParseManifest([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
