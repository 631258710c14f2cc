package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/kubeferry/ferry/pkg/install"
	"github.com/kubeferry/ferry/pkg/storagelocation"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// agentRepo is a location's volume repository, kept open between objects
// while the location's URL and credentials stay what they were (key).
type agentRepo struct {
	key  string
	loc  *store.Location
	repo *volumes.Repository
}

// repository returns the open volume repository of location name in ns
// (the default location for ""), refreshed so that it sees the snapshots
// other processes wrote since it was opened. A location whose URL or
// credential Secret changed since is opened again. Errors name the
// location.
func (a *Reconciler) repository(ctx context.Context, ns, name string) (*volumes.Repository, error) {
	if a.Opts.Password == "" {
		return nil, fmt.Errorf("the node agent has no volume repository password ($%s, from key %q of Secret %s, which the Helm-less install creates): %w", volumes.EnvPassword, install.RepositorySecretKey, install.RepositorySecretName, volumes.ErrNoPassword)
	}
	bsl, err := storagelocation.Resolve(ctx, a.Client, ns, name)
	if err != nil {
		return nil, err
	}
	creds, err := storagelocation.Credentials(ctx, a.APIReader, bsl)
	if err != nil {
		return nil, err
	}
	key := repoKey(bsl.Spec.URL, creds)
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.repos[bsl.Name]; ok {
		if r.key == key {
			if err := r.repo.Refresh(ctx); err != nil {
				return nil, err
			}
			return r.repo, nil
		}
		// Work may still run on the old repository: it is closed with
		// the agent, not now.
		a.retired = append(a.retired, r)
		delete(a.repos, bsl.Name)
	}
	loc, err := storagelocation.OpenWith(ctx, bsl, creds)
	if err != nil {
		return nil, fmt.Errorf("backup storage location %s: %w", bsl.Name, err)
	}
	repo, err := volumes.Open(ctx, loc, a.Opts.Password, volumes.OpenOptions{})
	if err != nil {
		loc.Close()
		return nil, fmt.Errorf("backup storage location %s: %w", bsl.Name, err)
	}
	repo.SparseFiles = a.Opts.SparseFiles
	if a.repos == nil {
		a.repos = map[string]*agentRepo{}
	}
	a.repos[bsl.Name] = &agentRepo{key: key, loc: loc, repo: repo}
	return repo, nil
}

// repoKey identifies a location's URL and credentials (a digest: the
// credentials are not kept in the clear).
func repoKey(url string, creds map[string]string) string {
	keys := make([]string, 0, len(creds))
	for k := range creds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	fmt.Fprintf(h, "%q", url)
	for _, k := range keys {
		fmt.Fprintf(h, "\x00%q=%q", k, creds[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (a *Reconciler) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, r := range a.repos {
		_ = r.repo.Close(context.Background())
		r.loc.Close()
		delete(a.repos, name)
	}
	for _, r := range a.retired {
		_ = r.repo.Close(context.Background())
		r.loc.Close()
	}
	a.retired = nil
}
