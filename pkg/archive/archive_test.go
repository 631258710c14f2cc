package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
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
	defer a.Close()
	if len(a.Items) != 3 || sum.Entries != 3 {
		t.Fatalf("got %d items (summary %d), want 3", len(a.Items), sum.Entries)
	}
	paths := map[string]string{}
	for _, it := range a.Items {
		b, err := it.Read()
		if err != nil {
			t.Fatal(err)
		}
		paths[it.Path] = string(b)
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
	if a.Manifest.Entries != nil {
		t.Errorf("the manifest's entries are held twice: %v", a.Manifest.Entries)
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
		if _, err := Verify(bytes.NewReader(bad), "k", expect(sum)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Verify, flip at byte %d of %d: err = %v, want ErrCorrupt", i, len(data), err)
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
	ga, err := Verify(bytes.NewReader(good), "k", Expect{})
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
		"version after":  `{"entries":[],"formatVersion":"9.9.9"}`,
		"data after":     `{"formatVersion":"1.1.0","entries":[]} {}`,
		"entries twice":  `{"formatVersion":"1.1.0","entries":[],"Entries":[]}`,
		"not an object":  `[]`,
		"entries string": `{"formatVersion":"1.1.0","entries":"x"}`,
		"bad entry":      `{"formatVersion":"1.1.0","entries":[{"path":1}]}`,
		"cut":            `{"formatVersion":"1.1.0","entries":[{"path":"a","sha256":"` + strings.Repeat("0", 64) + `"}`,
	} {
		if _, err := ParseManifest([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestParseManifestFields: the streaming decoder reads every field as
// encoding/json would, whatever their order, and entries: null.
func TestParseManifestFields(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	m, err := ParseManifest([]byte(`{"entries":[{"path":"p","sha256":"` + sum + `","size":3,"kind":"ConfigMap"}],"backupName":"b",
		"formatVersion":"1.1.0","spec":{"x":[1,{"y":2}]},"preferredVersions":{"apps":"v1"},"unknown":{"a":"b"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.BackupName != "b" || string(m.Spec) != `{"x":[1,{"y":2}]}` || m.PreferredVersions["apps"] != "v1" || len(m.Entries) != 1 ||
		m.Entries[0] != (Entry{Path: "p", SHA256: sum, Size: 3, Kind: "ConfigMap"}) {
		t.Errorf("manifest %+v", m)
	}
	if m, err := ParseManifest([]byte(`{"formatVersion":"1.1.0","entries":null}`)); err != nil || len(m.Entries) != 0 {
		t.Errorf("entries null: %v %v", m, err)
	}
}

// TestSpoolRemoved: Read's spool file is unlinked at once (so it goes
// with the process, however that ends), its items read back until Close,
// and nothing is left behind by a refused archive either.
func TestSpoolRemoved(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	data, sum := writeTestArchive(t)
	empty := func(when string) {
		t.Helper()
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("%s: %d files left in $TMPDIR (%s)", when, len(left), left[0].Name())
		}
	}
	a, err := Read(bytes.NewReader(data), "k", expect(sum))
	if err != nil {
		t.Fatal(err)
	}
	empty("while open")
	if b, err := a.Items[0].Read(); err != nil || !strings.Contains(string(b), `"kind"`) {
		t.Fatalf("Read = %q, %v", b, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := a.Items[0].Read(); err == nil {
		t.Error("an item was read after Close")
	}
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 0x40
	if _, err := Read(bytes.NewReader(bad), "k", expect(sum)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	empty("after a refused archive")
	// Verify keeps nothing: every entry, no bytes.
	v, err := Verify(bytes.NewReader(data), "k", expect(sum))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Items) != 3 || v.Items[0].SHA256 == "" {
		t.Fatalf("Verify items %+v", v.Items)
	}
	if _, err := v.Items[0].Read(); !errors.Is(err, ErrNoData) {
		t.Errorf("Verify's item Read = %v, want ErrNoData", err)
	}
	empty("after Verify")
}

// TestSpoolFailure: a spool that cannot be written is a local error
// naming the folder, not a damaged archive.
func TestSpoolFailure(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "nosuch"))
	data, sum := writeTestArchive(t)
	_, err := Read(bytes.NewReader(data), "backups/b/b.tar.gz", expect(sum))
	if err == nil || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "spool") || !strings.Contains(err.Error(), "backups/b/b.tar.gz") {
		t.Fatalf("err = %v, want a spool error naming the archive, not ErrCorrupt", err)
	}
}

// TestReadKeepsNoItemBytes: reading 64 entries of 1 MiB allocates far
// less than the entries' size: their bytes go to the spool, not memory,
// and come back one by one.
func TestReadKeepsNoItemBytes(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 64, 1 << 20
	for i := 0; i < n; i++ {
		data := bytes.Repeat([]byte(fmt.Sprintf("%04d", i)), size/4)
		if err := w.WriteItem(Entry{Resource: "configmaps", Namespace: "n", Name: fmt.Sprint(i)}, data); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := w.Close(Manifest{BackupName: "big"})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	a, err := Read(bytes.NewReader(buf.Bytes()), "k", expect(sum))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > n*size/8 {
		t.Errorf("reading %d MiB of entries allocated %d MiB", n*size>>20, alloc>>20)
	}
	for i, it := range a.Items {
		b, err := it.Read()
		if err != nil || len(b) != size || string(b[:4]) != fmt.Sprintf("%04d", i) {
			t.Fatalf("item %d: %d bytes %q, %v", i, len(b), b[:min(len(b), 4)], err)
		}
	}
}

// TestManifestOverEntryLimit: the manifest of a large cluster's backup is
// bigger than one entry may be (a 200,000-object backup's was 73 MB, over
// MaxEntrySize's 64 MiB, and its restore was refused as damaged). It is
// read one entry at a time, so it has a bound of its own.
func TestManifestOverEntryLimit(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 240)
	one := Entry{Path: ItemPath("", "configmaps", "n", long+"-0000000"), Resource: "configmaps", Namespace: "n", Name: long + "-0000000", Size: 2, SHA256: strings.Repeat("a", 64)}
	ej, _ := json.Marshal(one)
	n := MaxEntrySize/len(ej) + 2000 // the manifest is over MaxEntrySize
	for i := 0; i < n; i++ {
		if err := w.WriteItem(Entry{Resource: "configmaps", Namespace: "n", Name: fmt.Sprintf("%s-%07d", long, i)}, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := w.Close(Manifest{BackupName: "large"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := Read(bytes.NewReader(buf.Bytes()), "k", expect(sum))
	if err != nil {
		t.Fatalf("an archive of %d entries: %v", n, err)
	}
	defer a.Close()
	if len(a.Items) != n {
		t.Fatalf("%d items, want %d", len(a.Items), n)
	}
	if _, err := Verify(bytes.NewReader(buf.Bytes()), "k", expect(sum)); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// TestManifestEncoding: the manifest written one entry at a time is the
// same bytes as json.Marshal of the whole manifest.
func TestManifestEncoding(t *testing.T) {
	m := Manifest{FormatVersion: FormatVersion, BackupName: "b", Created: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC),
		Spec: json.RawMessage(`{"includedNamespaces":["a"]}`), SourceVersion: "v1.37.0", PreferredVersions: map[string]string{"apps": "v1", "": "v1"}}
	for _, entries := range [][]Entry{nil, {{Path: "resources/a/cluster/x.json", Resource: "a", Name: "x", Size: 2, SHA256: "s"}},
		{{Path: "p1", Name: "é\"<>"}, {Path: "p2", Group: "apps", Namespace: "n"}}} {
		var buf bytes.Buffer
		if err := encodeManifest(&buf, m, entries); err != nil {
			t.Fatal(err)
		}
		whole := m
		whole.Entries = entries
		if whole.Entries == nil {
			whole.Entries = []Entry{}
		}
		want, _ := json.Marshal(whole)
		if buf.String() != string(want) {
			t.Errorf("streamed %s\nwhole    %s", buf.String(), want)
		}
	}
}
