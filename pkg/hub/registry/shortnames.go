package registry

import (
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

// WithShortNames is a kind's storage that discovery lists with short
// names (kubectl get bsl), as a CRD's shortNames are.
type WithShortNames struct {
	*genericregistry.Store
	Names []string
}

var _ rest.ShortNamesProvider = WithShortNames{}

// ShortNames implements rest.ShortNamesProvider.
func (s WithShortNames) ShortNames() []string { return s.Names }
