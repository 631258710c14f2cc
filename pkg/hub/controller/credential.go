package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"filippo.io/age"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/store"
)

// credential reads the Credential name of namespace, referred to at path:
// CredentialNotFound when it is not there.
func credential(ctx context.Context, reader client.Reader, namespace, name, path string) (*v1beta1.Credential, error) {
	var c v1beta1.Credential
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fail("CredentialNotFound", "%s: Credential %q not found in namespace %s", path, name, namespace)
		}
		return nil, err
	}
	return &c, nil
}

// access is how the hub opens one backup storage location: its URL, the
// Credential with its credentials, its encryption, and the spec fields
// (and the object, in what) that errors name. A Migration's
// (migrationAccess) and a BackupStorageLocation's (locationAccess) are
// opened by the same code.
type access struct {
	namespace, url string
	credentialRef  *v1beta1.LocalObjectReference
	encryption     v1beta1.Encryption
	// urlField, credentialField and encryptionField are the spec fields.
	urlField, credentialField, encryptionField string
	// what prefixes errors about another object than the one run
	// (`BackupStorageLocation "primary": `); empty for the object's own.
	what string
}

// migrationAccess is the location of m: spec.storage and spec.encryption.
func migrationAccess(m *v1beta1.Migration) access {
	return access{namespace: m.Namespace, url: m.Spec.Storage.Location, credentialRef: m.Spec.Storage.CredentialRef, encryption: m.Spec.Encryption,
		urlField: "spec.storage.location", credentialField: "spec.storage.credentialRef", encryptionField: "spec.encryption"}
}

// locationAccess is the BackupStorageLocation l: spec.url,
// spec.credentialRef and spec.encryption, named in errors when it is
// another object's (a Backup's, a Restore's).
func locationAccess(l *v1beta1.BackupStorageLocation, another bool) access {
	a := access{namespace: l.Namespace, url: l.Spec.URL, credentialRef: l.Spec.CredentialRef,
		urlField: "spec.url", credentialField: "spec.credentialRef", encryptionField: "spec.encryption"}
	if e := l.Spec.Encryption; e != nil {
		a.encryption = *e
	}
	if another {
		a.what = fmt.Sprintf("BackupStorageLocation %q: ", l.Name)
	}
	return a
}

// credentials are the location credentials of a (its credentialRef),
// checked for the location's scheme; nil when it names none (the hub's
// own are used).
func (a access) credentials(ctx context.Context, reader client.Reader) (map[string]string, error) {
	ref := a.credentialRef
	if ref == nil {
		return nil, nil
	}
	path := a.what + a.credentialField
	c, err := credential(ctx, reader, a.namespace, ref.Name, path)
	if err != nil {
		return nil, err
	}
	creds := map[string]string{}
	for k, v := range c.Data {
		if len(v) == 0 { // would silently mean the hub's own credentials
			return nil, fail("InvalidCredential", "%s: Credential %q: key %s is empty", path, ref.Name, k)
		}
		creds[k] = string(v)
	}
	if err := store.CheckURLCredentials(a.url, creds); err != nil {
		return nil, fail("InvalidCredential", "%s: Credential %q: %w", path, ref.Name, err)
	}
	// A Credential stands alone: one that names nobody would reach the
	// store as the hub (its own keys, its files), which only users who
	// may use hubstorage may (pkg/hub/admission).
	if scheme, _, _ := strings.Cut(a.url, ":"); len(store.CredentialKeys(scheme)) > 0 {
		if err := store.CheckIdentity(scheme, creds); err != nil {
			return nil, fail("InvalidCredential", "%s: Credential %q: %w", path, ref.Name, err)
		}
	}
	return creds, nil
}

// encryptionOf is the age encryption of a, nil when it has none: the
// identity from its Credential key, checked against the recipients
// (store.NewEncryption).
func (a access) encryptionOf(ctx context.Context, reader client.Reader) (*store.Encryption, error) {
	e := a.encryption
	field := a.what + a.encryptionField
	var ids []age.Identity
	if ref := e.IdentityRef; ref != nil {
		path := field + ".identityRef"
		c, err := credential(ctx, reader, a.namespace, ref.Name, path)
		if err != nil {
			return nil, err
		}
		data, ok := c.Data[ref.Key]
		if !ok {
			return nil, fail("InvalidCredential", "%s: Credential %q has no key %q", path, ref.Name, ref.Key)
		}
		if ids, err = store.ParseIdentities(bytes.NewReader(data), fmt.Sprintf("Credential %q key %q", ref.Name, ref.Key)); err != nil {
			return nil, fail("InvalidCredential", "%s: %w", path, err)
		}
	}
	enc, err := store.NewEncryption(e.Recipients, ids)
	if errors.Is(err, store.ErrNoMatchingIdentity) {
		return nil, fail("InvalidSpec", "%s.identityRef: %w (%s.recipients)", field, err, field)
	}
	if err != nil {
		return nil, fail("InvalidSpec", "%s.recipients: %w", field, err)
	}
	return enc, nil
}

// open opens the location with its credentials (or the hub's own) and
// encryption; unavailable is the reason when the store cannot be opened.
// It also returns the credentials (nil: the hub's own), which the helper
// pods get.
func (a access) open(ctx context.Context, reader client.Reader, unavailable string) (*store.Location, map[string]string, error) {
	creds, err := a.credentials(ctx, reader)
	if err != nil {
		return nil, nil, err
	}
	enc, err := a.encryptionOf(ctx, reader)
	if err != nil {
		return nil, nil, err
	}
	var open []store.OpenOption
	if creds != nil {
		open = append(open, store.WithCredentials(creds))
	}
	loc, err := store.Open(ctx, a.url, open...)
	if err != nil && creds != nil {
		return nil, nil, fail(unavailable, "%s%s, with the keys of Credential %q (%s): %w", a.what, a.urlField, a.credentialRef.Name, a.credentialField, err)
	}
	if err != nil {
		return nil, nil, fail(unavailable, "%s%s: %w", a.what, a.urlField, err)
	}
	if enc != nil {
		loc.SetEncryption(enc)
	}
	return loc, creds, nil
}

// OpenLocation opens the backup storage location of m with its
// credentials (spec.storage.credentialRef, or the hub's own) and
// encryption (spec.encryption), for the Migration's run and for the
// hub's /reports/. It also returns the credentials (nil: the hub's own),
// which the helper pods get.
func OpenLocation(ctx context.Context, reader client.Reader, m *v1beta1.Migration) (*store.Location, map[string]string, error) {
	return migrationAccess(m).open(ctx, reader, "StorageUnavailable")
}
