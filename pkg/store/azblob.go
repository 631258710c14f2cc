package store

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
)

// openAzure opens an azblob:// location with credentials of WithCredentials
// (without, Open leaves it to gocloud.dev's opener and the environment).
// The container client is built here, so nothing touches the process
// environment. It accepts the query parameters of gocloud.dev's azblob URL
// opener (domain, protocol, cdn, localemu, storage_account; see
// https://gocloud.dev/howto/blob/#azure) and prefix. With
// EnvAzureStorageConnectionString the connection string names the
// endpoint, and only prefix may be in the query.
func openAzure(ctx context.Context, u *url.URL, creds map[string]string) (*blob.Bucket, error) {
	q := u.Query()
	prefix := q.Get("prefix")
	q.Del("prefix")
	var client *container.Client
	var err error
	if cs := creds[EnvAzureStorageConnectionString]; cs != "" {
		for k := range q {
			return nil, fmt.Errorf("query parameter %s: with %s the connection string names the endpoint", k, EnvAzureStorageConnectionString)
		}
		client, err = container.NewClientFromConnectionString(cs, u.Host, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvAzureStorageConnectionString, err)
		}
	} else {
		opts, err := azureServiceOptions(q, creds[EnvAzureStorageAccount])
		if err != nil {
			return nil, err
		}
		svc, err := azureblob.NewServiceURL(opts)
		if err != nil {
			return nil, err
		}
		cred, err := azblob.NewSharedKeyCredential(creds[EnvAzureStorageAccount], creds[EnvAzureStorageKey])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvAzureStorageKey, err)
		}
		containerURL, err := url.JoinPath(string(svc), u.Host)
		if err != nil {
			return nil, err
		}
		if client, err = container.NewClientWithSharedKeyCredential(containerURL, cred, nil); err != nil {
			return nil, err
		}
	}
	b, err := azureblob.OpenBucket(ctx, client, nil)
	if err != nil || prefix == "" {
		return b, err
	}
	return blob.PrefixedBucket(b, prefix), nil
}

// azureServiceOptions reads the service URL's parts from the query, as
// gocloud.dev's opener does, for account.
func azureServiceOptions(q url.Values, account string) (*azureblob.ServiceURLOptions, error) {
	opts := &azureblob.ServiceURLOptions{AccountName: account}
	for k := range q {
		v := q.Get(k)
		switch k {
		case "domain":
			opts.StorageDomain = v
		case "protocol":
			opts.Protocol = v
		case "cdn", "localemu":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("query parameter %s=%q: %w", k, v, err)
			}
			if k == "cdn" {
				opts.IsCDN = b
			} else {
				opts.IsLocalEmulator = b
			}
		case "storage_account":
			if v != account {
				return nil, fmt.Errorf("query parameter storage_account=%q differs from the credentials' %s %q", v, EnvAzureStorageAccount, account)
			}
		default:
			return nil, fmt.Errorf("unknown query parameter %q (an azblob URL takes domain, protocol, cdn, localemu, storage_account and prefix)", k)
		}
	}
	return opts, nil
}

// azureEnvCredentials are the shared key or connection string of the
// process environment, for Open to use as given credentials: then the
// same checks apply (one form, both halves of a pair, no endpoint in the
// URL beside a connection string). nil when the environment has neither,
// for gocloud.dev's opener (a SAS token, the Azure SDK's default
// credential).
func azureEnvCredentials() map[string]string {
	cs, key := os.Getenv(EnvAzureStorageConnectionString), os.Getenv(EnvAzureStorageKey)
	if cs == "" && key == "" {
		return nil
	}
	creds := map[string]string{}
	for _, k := range []string{EnvAzureStorageAccount, EnvAzureStorageKey, EnvAzureStorageConnectionString} {
		if v := os.Getenv(k); v != "" {
			creds[k] = v
		}
	}
	return creds
}
