package hub

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// certValidity is how long the hub's CA and serving certificate are valid.
const certValidity = 10 * 365 * 24 * time.Hour

// CA is the hub's certificate authority: it signs the serving certificate
// and the client certificates the hub accepts.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// PEM is the certificate, PEM-encoded.
	PEM []byte
}

// LoadOrCreateCA reads the CA from certFile and keyFile, or makes one and
// writes them (and their folders) when the certificate does not exist.
func LoadOrCreateCA(certFile, keyFile string) (*CA, error) {
	if _, err := os.Stat(certFile); errors.Is(err, os.ErrNotExist) {
		for _, f := range []string{certFile, keyFile} {
			if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
				return nil, err
			}
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			Subject:               pkix.Name{CommonName: "ferry-hub-ca"},
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		certPEM, err := sign(tmpl, &key.PublicKey, nil, key)
		if err != nil {
			return nil, err
		}
		if err := writeKeyPair(certFile, keyFile, certPEM, key); err != nil {
			return nil, err
		}
	}
	return LoadCA(certFile, keyFile)
}

// LoadCA reads a CA's certificate and key (PEM files).
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	key, err := keyutil.PrivateKeyFromFile(keyFile)
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", keyFile)
	}
	return &CA{Cert: cert, Key: signer, PEM: certPEM}, nil
}

// IssueClientCert returns a client certificate and key (PEM) for user in
// groups, which the hub authenticates as that user.
func (ca *CA) IssueClientCert(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if certPEM, err = sign(tmpl, &key.PublicKey, ca.Cert, ca.Key); err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// ensureServingCert writes a serving certificate signed by ca for hosts
// (names and IPs) unless certFile exists.
func ensureServingCert(ca *CA, certFile, keyFile string, hosts []string) error {
	if _, err := os.Stat(certFile); err == nil {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "ferry-hub"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	certPEM, err := sign(tmpl, &key.PublicKey, ca.Cert, ca.Key)
	if err != nil {
		return err
	}
	return writeKeyPair(certFile, keyFile, certPEM, key)
}

// sign signs tmpl (a fresh serial, valid from a minute ago) with key under
// parent; a nil parent self-signs.
func sign(tmpl *x509.Certificate, pub crypto.PublicKey, parent *x509.Certificate, key crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Minute)
	tmpl.NotAfter = time.Now().Add(certValidity)
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// writeKeyPair writes the key (0600) first, then the certificate: a
// certificate on disk always has its key.
func writeKeyPair(certFile, keyFile string, certPEM []byte, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(certFile, certPEM, 0o644)
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it into place, so a crash never leaves half a file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
