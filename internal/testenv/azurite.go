package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// Azurite's well-known development account: the only one it accepts by
// default, with the key Microsoft documents for it
// (https://learn.microsoft.com/azure/storage/common/storage-use-azurite#well-known-storage-account-and-key).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite is a running Azurite 3.37.0 blob service (Azure Blob Storage
// emulator, validating shared-key signatures) on 127.0.0.1. Get one from
// StartAzurite; end it with Stop.
type Azurite struct {
	// Endpoint is "http://127.0.0.1:PORT"; the account's service URL is
	// Endpoint + "/devstoreaccount1".
	Endpoint string
	// NodeEndpoint is "http://HostIP:PORT", the same server as nodes and
	// pods of StartNodeClusters reach it; set only in a confined network
	// namespace (RequireConfinedNetwork), where Azurite then listens on
	// every address.
	NodeEndpoint string
	// Dir is Azurite's --location: its metadata database and blob extents.
	Dir string
	// LogPath receives Azurite's stdout and stderr.
	LogPath string

	tmp      string
	cmd      *exec.Cmd
	done     chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// StartAzurite starts "azurite-blob --blobHost 127.0.0.1 --blobPort PORT
// --location DIR --silent --skipApiVersionCheck --disableTelemetry" on a free port with a
// fresh temporary DIR, and waits until it answers any HTTP request
// (timeout 60 s; typically about a second, Node.js starting, but 20 s on a
// loaded machine).
// azurite-blob comes from ToolsBinDir (hack/install-tools.sh installs the
// npm package). If t is non-nil, t.Cleanup(Stop) is registered.
//
// --skipApiVersionCheck: Azurite otherwise refuses requests of an Azure
// SDK newer than itself. --disableTelemetry: nothing leaves the machine.
//
// Errors: ToolsBinDir failure, Azurite exiting early (the error quotes its
// log) or not answering in time. A port taken between choosing and binding
// is retried up to 3 times.
func StartAzurite(ctx context.Context, t testing.TB) (*Azurite, error) {
	if t != nil {
		t.Helper()
	}
	bin, err := ToolsBinDir()
	if err != nil {
		return nil, err
	}
	a, err := startWithRetries(ctx, func() (*Azurite, error) { return startAzurite(ctx, filepath.Join(bin, "azurite-blob")) })
	if err != nil {
		return nil, err
	}
	if t != nil {
		t.Cleanup(func() {
			if err := a.Stop(); err != nil {
				t.Logf("testenv: %v", err)
			}
		})
	}
	return a, nil
}

func startAzurite(ctx context.Context, path string) (_ *Azurite, err error) {
	tmp, err := os.MkdirTemp("", "ferry-testenv-azurite-")
	if err != nil {
		return nil, fmt.Errorf("testenv: azurite: %w", err)
	}
	a := &Azurite{Dir: filepath.Join(tmp, "data"), LogPath: filepath.Join(tmp, "azurite.log"), tmp: tmp}
	defer func() {
		if err != nil {
			_ = a.Stop()
			err = fmt.Errorf("testenv: azurite: %w", err)
		}
	}()
	if err = os.Mkdir(a.Dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	bind, loopback, node := listenAddrs(port)
	a.Endpoint = "http://" + loopback
	if node != "" {
		a.NodeEndpoint = "http://" + node
	}
	a.cmd = exec.Command(path, "--blobHost", bind, "--blobPort", fmt.Sprint(port), "--location", a.Dir, "--silent", "--skipApiVersionCheck", "--disableTelemetry")
	a.cmd.Dir = tmp
	if a.done, err = startLogged(a.cmd, a.LogPath); err != nil {
		return nil, err
	}
	return a, waitHTTP(ctx, "azurite", a.Endpoint+"/"+AzuriteAccount+"?comp=list", a.done, a.LogPath, 60*time.Second)
}

// Stop stops Azurite (SIGTERM, SIGKILL after 5 s) and removes Dir and the
// log. Safe to call more than once; later calls return the first result.
func (a *Azurite) Stop() error {
	a.stopOnce.Do(func() { a.stopErr = stopProcess("azurite", a.cmd, a.done, a.tmp) })
	return a.stopErr
}

// CreateContainer creates the blob container name in the development
// account. Errors: invalid name (3-63 lower-case letters, digits and
// dashes), container exists, or the server is unreachable (the Azure SDK's
// error, wrapped).
func (a *Azurite) CreateContainer(ctx context.Context, name string) error {
	cred, err := azblob.NewSharedKeyCredential(AzuriteAccount, AzuriteKey)
	if err != nil {
		return fmt.Errorf("testenv: azurite: %w", err)
	}
	c, err := container.NewClientWithSharedKeyCredential(a.Endpoint+"/"+AzuriteAccount+"/"+name, cred, nil)
	if err == nil {
		_, err = c.Create(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("testenv: create container %q at %s: %w", name, a.Endpoint, err)
	}
	return nil
}

// URL returns the gocloud.dev blob URL of container for processes of the
// tests' namespace: "azblob://CONTAINER?protocol=http&domain=127.0.0.1:PORT&localemu=true".
// The account and key are not in the URL; see Env.
func (a *Azurite) URL(container string) string { return azuriteURL(container, a.Endpoint) }

// NodeURL is URL with NodeEndpoint, for nodes and pods; "" outside a
// confined network namespace.
func (a *Azurite) NodeURL(container string) string {
	if a.NodeEndpoint == "" {
		return ""
	}
	return azuriteURL(container, a.NodeEndpoint)
}

// azuriteURL: localemu=true puts the account in the path
// (http://HOST/devstoreaccount1/CONTAINER), which gocloud does by itself
// only for a domain starting with 127.0.0.1 or localhost, not for HostIP.
func azuriteURL(container, endpoint string) string {
	return fmt.Sprintf("azblob://%s?protocol=http&domain=%s&localemu=true", container, endpoint[len("http://"):])
}

// Credentials returns the development account as store.WithCredentials
// keys: AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY.
func (a *Azurite) Credentials() map[string]string {
	return map[string]string{"AZURE_STORAGE_ACCOUNT": AzuriteAccount, "AZURE_STORAGE_KEY": AzuriteKey}
}

// Env returns the same as "KEY=value" entries for a subprocess's
// environment (append them to os.Environ()).
func (a *Azurite) Env() []string {
	return []string{"AZURE_STORAGE_ACCOUNT=" + AzuriteAccount, "AZURE_STORAGE_KEY=" + AzuriteKey}
}

// ConnectionString returns a connection string for the development account
// at Endpoint (AZURE_STORAGE_CONNECTION_STRING's form).
func (a *Azurite) ConnectionString() string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s/%s;", AzuriteAccount, AzuriteKey, a.Endpoint, AzuriteAccount)
}
