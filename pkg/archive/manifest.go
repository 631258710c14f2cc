// Package archive is ferry's backup archive: a tar.gz whose item paths
// follow Velero's layout (so Velero tooling can read it, and ferry can read
// Velero's), plus ferry/manifest.json holding a SHA-256 for every entry.
//
// Layout (Velero pkg/archive, format version 1.1.0):
//
//	metadata/version                                    "1.1.0"
//	resources/<resource>[.<group>]/namespaces/<ns>/<name>.json
//	resources/<resource>[.<group>]/cluster/<name>.json
//	resources/<resource>[.<group>]/<version>/{namespaces/<ns>,cluster}/<name>.json
//	                                                    the same object at another served version
//	ferry/manifest.json                                 written last
//
// The writer streams: memory is bounded by one item, whatever the cluster
// size. So does the reader: it verifies an archive in one pass, spooling
// the items' bytes to a local file (Read) or keeping none (Verify), and
// holds only each item's Entry.
package archive

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// FormatVersion is the Velero archive format version ferry writes into
// metadata/version.
const FormatVersion = "1.1.0"

// Well-known entry paths.
const (
	VersionPath  = "metadata/version"
	ManifestPath = "ferry/manifest.json"
)

// Entry describes one archive entry: where it is, which API object it
// holds, its size in bytes and its SHA-256 (lower-case hex).
type Entry struct {
	Path      string `json:"path"`
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Resource  string `json:"resource,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
}

// GroupResource returns "resource.group", or "resource" for the core group.
func (e Entry) GroupResource() string { return GroupResource(e.Group, e.Resource) }

// Manifest is ferry/manifest.json: every other entry with its digest, the
// backup spec, and the source cluster's version and preferred version per
// API group (group "" is the core group).
type Manifest struct {
	FormatVersion     string            `json:"formatVersion"`
	BackupName        string            `json:"backupName"`
	Created           time.Time         `json:"created"`
	Spec              json.RawMessage   `json:"spec,omitempty"`
	SourceVersion     string            `json:"sourceVersion,omitempty"`
	PreferredVersions map[string]string `json:"preferredVersions,omitempty"`
	Entries           []Entry           `json:"entries"`
}

// ParseManifest decodes and validates a manifest. It rejects unknown
// format versions, entries without a path or digest, and duplicate paths.
func ParseManifest(data []byte) (*Manifest, error) {
	var entries []Entry
	m, err := decodeManifest(bytes.NewReader(data), func(e Entry) error {
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.Entries = entries
	return m, nil
}

// decodeManifest decodes a manifest from r as ParseManifest does, in one
// pass that hands each entry to each, in order, instead of keeping them:
// a manifest of many entries is never in memory whole. An error from each
// is returned as it is. The manifest returned has no Entries.
func decodeManifest(r io.Reader, each func(Entry) error) (*Manifest, error) {
	bad := func(err error) error { return fmt.Errorf("%s: corrupt JSON: %w", ManifestPath, err) }
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil {
		return nil, bad(err)
	} else if t != json.Delim('{') {
		return nil, bad(fmt.Errorf("not a JSON object"))
	}
	// Every field but the entries, in their order, decoded at the end
	// with encoding/json's own rules.
	rest := []byte{'{'}
	sawEntries := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		key, _ := t.(string)
		if !strings.EqualFold(key, "entries") {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, bad(err)
			}
			if len(rest) > 1 {
				rest = append(rest, ',')
			}
			k, _ := json.Marshal(key)
			rest = append(append(append(rest, k...), ':'), v...)
			continue
		}
		if sawEntries {
			return nil, bad(fmt.Errorf("entries listed twice"))
		}
		sawEntries = true
		if err := checkVersion(append(rest[:len(rest):len(rest)], '}')); err != nil {
			return nil, err
		}
		if err := decodeEntries(dec, each); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad(fmt.Errorf("data after the manifest object"))
	}
	var m Manifest
	if err := json.Unmarshal(append(rest, '}'), &m); err != nil {
		return nil, bad(err)
	}
	if m.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("%s: unsupported format version %q (want %q)", ManifestPath, m.FormatVersion, FormatVersion)
	}
	return &m, nil
}

// checkVersion refuses a manifest whose fields read so far (obj) give
// another format version, before its entries are looked at.
func checkVersion(obj []byte) error {
	var v struct {
		FormatVersion *string `json:"formatVersion"`
	}
	if json.Unmarshal(obj, &v) == nil && v.FormatVersion != nil && *v.FormatVersion != FormatVersion {
		return fmt.Errorf("%s: unsupported format version %q (want %q)", ManifestPath, *v.FormatVersion, FormatVersion)
	}
	return nil
}

// decodeEntries decodes the manifest's entries array (or null) one entry
// at a time, checking each has a path and a digest and that no path is
// listed twice.
func decodeEntries(dec *json.Decoder, each func(Entry) error) error {
	bad := func(err error) error { return fmt.Errorf("%s: corrupt JSON: %w", ManifestPath, err) }
	t, err := dec.Token()
	switch {
	case err != nil:
		return bad(err)
	case t == nil:
		return nil // "entries": null
	case t != json.Delim('['):
		return bad(fmt.Errorf("entries is not an array"))
	}
	seen := map[string]bool{}
	for i := 0; dec.More(); i++ {
		var e Entry
		if err := dec.Decode(&e); err != nil {
			return bad(err)
		}
		if e.Path == "" || len(e.SHA256) != 64 {
			return fmt.Errorf("%s: entry %d has no path or no SHA-256", ManifestPath, i)
		}
		if seen[e.Path] {
			return fmt.Errorf("%s: entry %q listed twice", ManifestPath, e.Path)
		}
		seen[e.Path] = true
		if err := each(e); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return bad(err)
	}
	return nil
}

// GroupResource returns "resource.group", or "resource" for the core group,
// the spelling Velero uses for archive directories.
func GroupResource(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

// ItemPath returns the Velero-layout path of an item. namespace "" means
// cluster-scoped.
func ItemPath(group, resource, namespace, name string) string {
	return VersionedItemPath(group, resource, "", namespace, name)
}

// VersionedItemPath returns the path of an item under a version directory
// (Velero's EnableAPIGroupVersions layout, pkg/archive "resources/<gr>/
// <version>[-preferredversion]/..."): ferry keeps an object's preferred
// version at ItemPath and its other versions at
// resources/<gr>/<version>/namespaces/<ns>/<name>.json. versionDir ""
// gives ItemPath.
func VersionedItemPath(group, resource, versionDir, namespace, name string) string {
	gr := GroupResource(group, resource)
	if namespace == "" {
		return path.Join("resources", gr, versionDir, "cluster", name+".json")
	}
	return path.Join("resources", gr, versionDir, "namespaces", namespace, name+".json")
}

// ParseItemPath splits a Velero-layout item path into group-resource,
// namespace ("" for cluster-scoped) and name. ok is false for paths that
// are not items. It accepts the versioned layout
// resources/<gr>/<version>[-preferredversion]/... too, returning the
// version directory in version.
func ParseItemPath(p string) (gr, version, namespace, name string, ok bool) {
	parts := strings.Split(p, "/")
	if len(parts) < 4 || parts[0] != "resources" || !strings.HasSuffix(p, ".json") {
		return "", "", "", "", false
	}
	gr = parts[1]
	rest := parts[2:]
	if rest[0] != "namespaces" && rest[0] != "cluster" {
		version = rest[0]
		rest = rest[1:]
	}
	switch {
	case len(rest) == 2 && rest[0] == "cluster":
		namespace, name = "", strings.TrimSuffix(rest[1], ".json")
	case len(rest) == 3 && rest[0] == "namespaces" && rest[1] != "":
		namespace, name = rest[1], strings.TrimSuffix(rest[2], ".json")
	default:
		return "", "", "", "", false
	}
	if gr == "" || name == "" {
		return "", "", "", "", false
	}
	return gr, version, namespace, name, true
}
