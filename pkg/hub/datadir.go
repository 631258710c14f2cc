package hub

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// The groups of the hub's authorizer (docs/design.md#the-hub).
const (
	// GroupMasters and GroupAdmins may do everything.
	GroupMasters = "system:masters"
	GroupAdmins  = "ferry:admins"
	// GroupViewers may get, list and watch everything but ClusterCredentials
	// and Credentials.
	GroupViewers = "ferry:viewers"
	// AdminUser is the user of the admin token the hub makes.
	AdminUser = "ferry-admin"
)

// dataDir is the layout of --data-dir.
type dataDir string

func (d dataDir) path(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}
func (d dataDir) caCert() string      { return d.path("pki", "ca.crt") }
func (d dataDir) caKey() string       { return d.path("pki", "ca.key") }
func (d dataDir) servingCert() string { return d.path("pki", "serving.crt") }
func (d dataDir) servingKey() string  { return d.path("pki", "serving.key") }
func (d dataDir) tokens() string      { return d.path("tokens.csv") }
func (d dataDir) encryption() string  { return d.path("encryption.yaml") }
func (d dataDir) etcd() string        { return d.path("etcd") }

// AdminKubeconfig is the admin's kubeconfig in the data directory dir.
func AdminKubeconfig(dir string) string { return filepath.Join(dir, "admin.kubeconfig") }

// CAFiles are the CA's certificate and key in the data directory dir.
func CAFiles(dir string) (cert, key string) {
	return dataDir(dir).caCert(), dataDir(dir).caKey()
}

// TokensFile is the static-token file the hub writes in dir (its admin
// token), in kube-apiserver's --token-auth-file format.
func TokensFile(dir string) string { return dataDir(dir).tokens() }

// prepare makes what the data directory needs on first start: its
// folders, the CA and serving certificate for hosts, the admin token and
// the encryption key. Later starts reuse them. It returns the CA and the
// admin token.
func (d dataDir) prepare(hosts []string) (*CA, string, error) {
	for _, dir := range []string{string(d), d.path("pki")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", err
		}
	}
	ca, err := LoadOrCreateCA(d.caCert(), d.caKey())
	if err != nil {
		return nil, "", fmt.Errorf("the hub's CA: %w", err)
	}
	if err := ensureServingCert(ca, d.servingCert(), d.servingKey(), hosts); err != nil {
		return nil, "", fmt.Errorf("the hub's serving certificate: %w", err)
	}
	token, err := d.adminToken()
	if err != nil {
		return nil, "", err
	}
	if err := d.ensureEncryptionConfig(); err != nil {
		return nil, "", err
	}
	return ca, token, nil
}

// lock takes the data directory (DIR/hub.lock, an exclusive flock held
// while the hub runs, released by the kernel if it dies): two hubs on one
// directory would share one etcd's files, and the second would wait on
// etcd's own lock without end.
func (d dataDir) lock() (unlock func(), err error) {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(d.path("hub.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another ferry hub (it holds %s)", string(d), d.path("hub.lock"))
		}
		return nil, fmt.Errorf("locking data directory %s: %w", string(d), err)
	}
	return func() { f.Close() }, nil
}

// adminToken returns the admin token of tokens.csv, writing the file with
// a new random token when it does not exist.
func (d dataDir) adminToken() (string, error) {
	b, err := os.ReadFile(d.tokens())
	if errors.Is(err, os.ErrNotExist) {
		token := randomHex(32)
		line := fmt.Sprintf("%s,%s,%s,%q\n", token, AdminUser, AdminUser, GroupMasters)
		return token, writeFileAtomic(d.tokens(), []byte(line), 0o600)
	}
	if err != nil {
		return "", err
	}
	token, user, ok := firstToken(b)
	if !ok || user != AdminUser {
		return "", fmt.Errorf("%s: its first line is not the hub's admin token (token,%s,...)", d.tokens(), AdminUser)
	}
	return token, nil
}

// firstToken returns the token and user of a token file's first line.
func firstToken(b []byte) (token, user string, ok bool) {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	rec, err := r.Read()
	if err != nil || len(rec) < 2 || rec[0] == "" {
		return "", "", false
	}
	return rec[0], rec[1], true
}

// encryptedResources are the kinds the hub stores encrypted at rest.
var encryptedResources = []string{"clustercredentials.ferry.dev", "credentials.ferry.dev"}

// ensureEncryptionConfig writes the apiserver's EncryptionConfiguration
// with a random secretbox key for encryptedResources (0600), unless it
// exists; an existing one written before a kind joined encryptedResources
// gets that kind added to the entry of the others, with the same keys.
func (d dataDir) ensureEncryptionConfig() error {
	data, err := os.ReadFile(d.encryption())
	if err == nil {
		return d.addEncryptedResources(data)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	cfg := apiserverv1.EncryptionConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiserver.config.k8s.io/v1", Kind: "EncryptionConfiguration"},
		Resources: []apiserverv1.ResourceConfiguration{{
			Resources: encryptedResources,
			Providers: []apiserverv1.ProviderConfiguration{
				{Secretbox: &apiserverv1.SecretboxConfiguration{Keys: []apiserverv1.Key{{Name: "key1", Secret: base64.StdEncoding.EncodeToString(key)}}}},
				{Identity: &apiserverv1.IdentityConfiguration{}},
			},
		}},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return writeFileAtomic(d.encryption(), out, 0o600)
}

// addEncryptedResources adds the encryptedResources that data (an
// EncryptionConfiguration) lacks to its entry that holds any of them.
func (d dataDir) addEncryptedResources(data []byte) error {
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", d.encryption(), err)
	}
	listed := func(r string) bool {
		return slices.ContainsFunc(cfg.Resources, func(rc apiserverv1.ResourceConfiguration) bool { return slices.Contains(rc.Resources, r) })
	}
	for i := range cfg.Resources {
		rc := &cfg.Resources[i]
		if !slices.ContainsFunc(rc.Resources, func(r string) bool { return slices.Contains(encryptedResources, r) }) {
			continue
		}
		n := len(rc.Resources)
		for _, r := range encryptedResources {
			if !listed(r) { // in no entry yet
				rc.Resources = append(rc.Resources, r)
			}
		}
		if len(rc.Resources) == n {
			return nil
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			return err
		}
		return writeFileAtomic(d.encryption(), out, 0o600)
	}
	return fmt.Errorf("%s encrypts none of %s: add them, or remove the file to have the hub write a new one (the objects already stored encrypted need its old keys)", d.encryption(), strings.Join(encryptedResources, ", "))
}

// writeAdminKubeconfig writes admin.kubeconfig (0600) for the hub at
// host:port, trusting ca, with the admin token.
func (d dataDir) writeAdminKubeconfig(host string, port int, ca []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["ferry-hub"] = &clientcmdapi.Cluster{
		Server:                   "https://" + net.JoinHostPort(host, strconv.Itoa(port)),
		CertificateAuthorityData: ca,
	}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["ferry-hub"] = &clientcmdapi.Context{Cluster: "ferry-hub", AuthInfo: AdminUser, Namespace: "default"}
	cfg.CurrentContext = "ferry-hub"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFileAtomic(AdminKubeconfig(string(d)), b, 0o600)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}
