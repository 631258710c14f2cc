package hub

import (
	"os"
	"slices"
	"strings"
	"testing"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"
)

// TestEncryptionConfigUpgrade: a data directory written before
// Credentials existed gets credentials.ferry.dev added to the entry of
// clustercredentials.ferry.dev, keeping its key; a new one has both; a
// file that encrypts neither is refused by name.
func TestEncryptionConfigUpgrade(t *testing.T) {
	const key = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
	old := `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources:
  - clustercredentials.ferry.dev
  providers:
  - secretbox:
      keys:
      - name: key1
        secret: ` + key + `
  - identity: {}
`
	read := func(d dataDir) apiserverv1.EncryptionConfiguration {
		t.Helper()
		data, err := os.ReadFile(d.encryption())
		if err != nil {
			t.Fatal(err)
		}
		var cfg apiserverv1.EncryptionConfiguration
		if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	d := dataDir(t.TempDir())
	if err := os.WriteFile(d.encryption(), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second run changes nothing
		if err := d.ensureEncryptionConfig(); err != nil {
			t.Fatal(err)
		}
		cfg := read(d)
		if len(cfg.Resources) != 1 || !slices.Equal(cfg.Resources[0].Resources, encryptedResources) {
			t.Fatalf("upgraded resources %+v, want one entry of %v", cfg.Resources, encryptedResources)
		}
		p := cfg.Resources[0].Providers
		if len(p) != 2 || p[0].Secretbox == nil || p[0].Secretbox.Keys[0].Secret != key || p[1].Identity == nil {
			t.Errorf("upgraded providers %+v, want the old secretbox key, then identity", p)
		}
	}

	fresh := dataDir(t.TempDir())
	if err := fresh.ensureEncryptionConfig(); err != nil {
		t.Fatal(err)
	}
	cfg := read(fresh)
	if len(cfg.Resources) != 1 || !slices.Equal(cfg.Resources[0].Resources, encryptedResources) || cfg.Resources[0].Providers[0].Secretbox == nil {
		t.Errorf("new config %+v, want secretbox for %v", cfg.Resources, encryptedResources)
	}
	if st, _ := os.Stat(fresh.encryption()); st.Mode().Perm() != 0o600 {
		t.Errorf("new config mode %v, want 0600", st.Mode().Perm())
	}

	// A kind already in another entry (with another key) is not added
	// again.
	split := dataDir(t.TempDir())
	two := old + `- resources:
  - credentials.ferry.dev
  providers:
  - secretbox:
      keys:
      - name: key2
        secret: ` + key + `
`
	if err := os.WriteFile(split.encryption(), []byte(two), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := split.ensureEncryptionConfig(); err != nil {
		t.Fatal(err)
	}
	if cfg := read(split); len(cfg.Resources) != 2 || len(cfg.Resources[0].Resources) != 1 || len(cfg.Resources[1].Resources) != 1 {
		t.Errorf("two entries, each of one kind: %+v, want them unchanged", cfg.Resources)
	}

	other := dataDir(t.TempDir())
	if err := os.WriteFile(other.encryption(), []byte(strings.Replace(old, "clustercredentials.ferry.dev", "secrets", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := other.ensureEncryptionConfig(); err == nil || !strings.Contains(err.Error(), "encrypts none of clustercredentials.ferry.dev") {
		t.Errorf("a config encrypting neither kind: %v, want refused by name", err)
	}
}
