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

// storageCredentials are the location credentials of m
// (spec.storage.credentialRef), checked for the location's scheme; nil
// when it names none (the hub's own are used).
func storageCredentials(ctx context.Context, reader client.Reader, m *v1beta1.Migration) (map[string]string, error) {
	ref := m.Spec.Storage.CredentialRef
	if ref == nil {
		return nil, nil
	}
	const path = "spec.storage.credentialRef"
	c, err := credential(ctx, reader, m.Namespace, ref.Name, path)
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
	scheme, _, _ := strings.Cut(m.Spec.Storage.Location, "://")
	if err := store.CheckCredentials(scheme, creds); err != nil {
		return nil, fail("InvalidCredential", "%s: Credential %q: %w", path, ref.Name, err)
	}
	return creds, nil
}

// encryption is the age encryption of m (spec.encryption), nil when it
// has none: the identity from its Credential key, checked against the
// recipients (store.NewEncryption).
func encryption(ctx context.Context, reader client.Reader, m *v1beta1.Migration) (*store.Encryption, error) {
	e := m.Spec.Encryption
	var ids []age.Identity
	if ref := e.IdentityRef; ref != nil {
		const path = "spec.encryption.identityRef"
		c, err := credential(ctx, reader, m.Namespace, ref.Name, path)
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
		return nil, fail("InvalidSpec", "spec.encryption.identityRef: %w (spec.encryption.recipients)", err)
	}
	if err != nil {
		return nil, fail("InvalidSpec", "spec.encryption.recipients: %w", err)
	}
	return enc, nil
}

// OpenLocation opens the backup storage location of m with its
// credentials (spec.storage.credentialRef, or the hub's own) and
// encryption (spec.encryption), for the Migration's run and for the
// hub's /reports/. It also returns the credentials (nil: the hub's own),
// which the helper pods get.
func OpenLocation(ctx context.Context, reader client.Reader, m *v1beta1.Migration) (*store.Location, map[string]string, error) {
	creds, err := storageCredentials(ctx, reader, m)
	if err != nil {
		return nil, nil, err
	}
	enc, err := encryption(ctx, reader, m)
	if err != nil {
		return nil, nil, err
	}
	var open []store.OpenOption
	if creds != nil {
		open = append(open, store.WithCredentials(creds))
	}
	loc, err := store.Open(ctx, m.Spec.Storage.Location, open...)
	if err != nil {
		return nil, nil, fail("StorageUnavailable", "spec.storage.location: %w", err)
	}
	if enc != nil {
		loc.SetEncryption(enc)
	}
	return loc, creds, nil
}
