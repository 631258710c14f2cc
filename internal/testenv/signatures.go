package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types and annotations of cosign's tag-based artifacts and of
// OCI 1.1 artifacts, as cosign and notation write them.
const (
	CosignSignatureType   = "application/vnd.dev.cosign.simplesigning.v1+json"
	CosignAttestationType = "application/vnd.dsse.envelope.v1+json"
	CosignSignatureAnno   = "dev.cosignproject.cosign/signature"
	SPDXType              = "application/spdx+json"
	NotationSignatureType = "application/vnd.cncf.notary.signature"
	OCIEmptyType          = "application/vnd.oci.empty.v1+json"
)

// Signer is an ECDSA P-256 key pair, cosign's default kind of key.
type Signer struct {
	Key *ecdsa.PrivateKey
}

// NewSigner makes a fresh key pair.
func NewSigner() (*Signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Signer{Key: k}, nil
}

// PublicPEM is the public key as `cosign public-key` prints it.
func (s *Signer) PublicPEM() ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(&s.Key.PublicKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func (s *Signer) sign(payload []byte) ([]byte, error) {
	sum := sha256.Sum256(payload)
	return ecdsa.SignASN1(rand.Reader, s.Key, sum[:])
}

// SimpleSigningPayload is cosign's signed payload for an image: its
// repository and manifest digest.
func SimpleSigningPayload(repo string, digest v1.Hash) []byte {
	p := map[string]any{
		"critical": map[string]any{
			"identity": map[string]string{"docker-reference": repo},
			"image":    map[string]string{"docker-manifest-digest": digest.String()},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	}
	data, _ := json.Marshal(p)
	return data
}

// CosignTag is the tag of cosign's artifact of kind suffix ("sig",
// "att", "sbom") for the manifest digest.
func CosignTag(digest v1.Hash, suffix string) string {
	return strings.Replace(digest.String(), ":", "-", 1) + "." + suffix
}

// SignCosign pushes a cosign-format signature of repo@digest to r: the
// tag sha256-<hex>.sig, an image whose one layer is the simple-signing
// payload, annotated with its base64 ECDSA signature (what `cosign sign
// --key` writes). It returns the signature's manifest digest.
func (r *Registry) SignCosign(repo string, digest v1.Hash, s *Signer) (v1.Hash, error) {
	payload := SimpleSigningPayload(r.Host+"/"+repo, digest)
	sig, err := s.sign(payload)
	if err != nil {
		return v1.Hash{}, err
	}
	layer := static.NewLayer(payload, CosignSignatureType)
	img, err := mutate.Append(ociEmpty(), mutate.Addendum{Layer: layer, Annotations: map[string]string{CosignSignatureAnno: base64.StdEncoding.EncodeToString(sig)}})
	if err != nil {
		return v1.Hash{}, err
	}
	return r.pushTagged(repo, CosignTag(digest, "sig"), img)
}

// AttestCosign pushes a cosign-format attestation of repo@digest: the
// tag sha256-<hex>.att, a DSSE envelope of an in-toto statement signed
// with s.
func (r *Registry) AttestCosign(repo string, digest v1.Hash, s *Signer) (v1.Hash, error) {
	stmt, _ := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v0.1",
		"predicateType": "https://slsa.dev/provenance/v0.2",
		"subject":       []map[string]any{{"name": r.Host + "/" + repo, "digest": map[string]string{"sha256": digest.Hex}}},
		"predicate":     map[string]any{"builder": map[string]string{"id": "ferry-test"}},
	})
	const payloadType = "application/vnd.in-toto+json"
	pae := fmt.Sprintf("DSSEv1 %d %s %d %s", len(payloadType), payloadType, len(stmt), stmt)
	sig, err := s.sign([]byte(pae))
	if err != nil {
		return v1.Hash{}, err
	}
	env, _ := json.Marshal(map[string]any{
		"payloadType": payloadType,
		"payload":     base64.StdEncoding.EncodeToString(stmt),
		"signatures":  []map[string]string{{"sig": base64.StdEncoding.EncodeToString(sig)}},
	})
	layer := static.NewLayer(env, CosignAttestationType)
	img, err := mutate.Append(ociEmpty(), mutate.Addendum{Layer: layer, Annotations: map[string]string{"predicateType": "https://slsa.dev/provenance/v0.2"}})
	if err != nil {
		return v1.Hash{}, err
	}
	return r.pushTagged(repo, CosignTag(digest, "att"), img)
}

// AttachReferrer pushes an OCI 1.1 artifact of artifactType with one
// layer of content, whose subject is repo@subject (size and media type
// as given), by digest. go-containerregistry keeps the referrers tag
// schema's index (tag sha256-<hex>) where the registry has no referrers
// API, as Debian's docker-registry has not. It returns its digest.
func (r *Registry) AttachReferrer(repo string, subject v1.Descriptor, artifactType string, content []byte) (v1.Hash, error) {
	layer := static.NewLayer(content, types.MediaType(artifactType))
	img, err := mutate.Append(ociEmpty(), mutate.Addendum{Layer: layer})
	if err != nil {
		return v1.Hash{}, err
	}
	img = mutate.ConfigMediaType(img, OCIEmptyType)
	img = mutate.Annotations(img, map[string]string{"org.opencontainers.image.created": "2026-12-05T00:00:00Z"}).(v1.Image)
	withSubject := mutate.Subject(img, subject).(v1.Image)
	art := &artifactImage{Image: withSubject, artifactType: artifactType}
	h, err := art.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	ref, err := r.parse(repo + "@" + h.String())
	if err != nil {
		return v1.Hash{}, err
	}
	return h, remote.Write(ref, art, r.remoteOptions()...)
}

// artifactImage sets the manifest's artifactType.
type artifactImage struct {
	v1.Image
	artifactType string
}

func (a *artifactImage) RawManifest() ([]byte, error) {
	raw, err := a.Image.RawManifest()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["artifactType"] = a.artifactType
	return json.Marshal(m)
}

func (a *artifactImage) Digest() (v1.Hash, error) {
	raw, err := a.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(strings.NewReader(string(raw)))
	return h, err
}

func (a *artifactImage) Size() (int64, error) {
	raw, err := a.RawManifest()
	return int64(len(raw)), err
}

func (a *artifactImage) Manifest() (*v1.Manifest, error) {
	raw, err := a.RawManifest()
	if err != nil {
		return nil, err
	}
	return v1.ParseManifest(strings.NewReader(string(raw)))
}

// Descriptor describes repo's manifest at ref (a tag or digest) as a
// subject.
func (r *Registry) Descriptor(repoRef string) (v1.Descriptor, error) {
	ref, err := r.parse(repoRef)
	if err != nil {
		return v1.Descriptor{}, err
	}
	d, err := remote.Head(ref, r.remoteOptions()...)
	if err != nil {
		return v1.Descriptor{}, err
	}
	return *d, nil
}

func (r *Registry) pushTagged(repo, tag string, img v1.Image) (v1.Hash, error) {
	if err := r.Push(repo+":"+tag, img); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

func ociEmpty() v1.Image {
	return mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1)
}
