package archive

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzRead feeds arbitrary bytes to the archive reader: it must return an
// archive or an error, never panic or allocate without bound. The seed
// corpus (testdata/fuzz/FuzzRead) runs as a normal test.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf)
	_ = w.WriteItem(Entry{Resource: "configmaps", Version: "v1", Namespace: "a", Name: "b"}, []byte(`{"kind":"ConfigMap"}`))
	_, _ = w.Close(Manifest{BackupName: "seed"})
	f.Add(buf.Bytes())
	f.Add([]byte{})
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Read(bytes.NewReader(data), "fuzz", Expect{AllowNoManifest: true})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		defer a.Close()
		for _, it := range a.Items {
			if it.Path == "" {
				t.Fatal("item without a path")
			}
			if b, err := it.Read(); err != nil || int64(len(b)) != it.Size {
				t.Fatalf("item %s: %d bytes read back of %d: %v", it.Path, len(b), it.Size, err)
			}
		}
	})
}

// FuzzParseManifest checks the manifest parser on arbitrary JSON.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"formatVersion":"1.1.0","backupName":"b","entries":[{"path":"resources/x/cluster/a.json","sha256":"` + string(bytes.Repeat([]byte("a"), 64)) + `","size":3}]}`))
	f.Add([]byte(`{"formatVersion":"1.1.0","entries":null}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, e := range m.Entries {
			if e.Path == "" || len(e.SHA256) != 64 || seen[e.Path] {
				t.Fatalf("accepted a bad entry %+v", e)
			}
			seen[e.Path] = true
		}
	})
}

// FuzzParseItemPath checks the Velero path parser.
func FuzzParseItemPath(f *testing.F) {
	f.Add("resources/pods/namespaces/ns/p.json")
	f.Add("resources/a.b/v1-preferredversion/cluster/x.json")
	f.Fuzz(func(t *testing.T, p string) {
		gr, _, ns, name, ok := ParseItemPath(p)
		if ok && (gr == "" || name == "" || (ns == "" && !bytes.Contains([]byte(p), []byte("/cluster/")))) {
			t.Fatalf("ParseItemPath(%q) = %q %q %q", p, gr, ns, name)
		}
	})
}
