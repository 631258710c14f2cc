package nodeagent

import (
	"context"
	"fmt"

	"github.com/kubeferry/ferry/pkg/install"
	"github.com/kubeferry/ferry/pkg/storagelocation"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// agentRepo is a location's volume repository, kept open between objects.
type agentRepo struct {
	loc  *store.Location
	repo *volumes.Repository
}

// repository returns the open volume repository of location name in ns
// (the default location for ""), refreshed so that it sees the snapshots
// other processes wrote since it was opened. Errors name the location.
func (a *Reconciler) repository(ctx context.Context, ns, name string) (*volumes.Repository, error) {
	if a.Opts.Password == "" {
		return nil, fmt.Errorf("the node agent has no volume repository password ($%s, from key %q of Secret %s, which the Helm-less install creates): %w", volumes.EnvPassword, install.RepositorySecretKey, install.RepositorySecretName, volumes.ErrNoPassword)
	}
	bsl, err := storagelocation.Resolve(ctx, a.Client, ns, name)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.repos[bsl.Name]; ok {
		if err := r.repo.Refresh(ctx); err != nil {
			return nil, err
		}
		return r.repo, nil
	}
	loc, err := storagelocation.Open(ctx, a.APIReader, bsl)
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
	a.repos[bsl.Name] = &agentRepo{loc: loc, repo: repo}
	return repo, nil
}

func (a *Reconciler) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, r := range a.repos {
		_ = r.repo.Close(context.Background())
		r.loc.Close()
		delete(a.repos, name)
	}
}
