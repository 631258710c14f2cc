package hub

import (
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	clientrest "k8s.io/client-go/rest"

	hubadmission "github.com/kubeferry/ferry/pkg/hub/admission"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// admissionInformers are the caches of the FerryReferences admission
// plugin: the metadata (names, not specs) of the hub's Clusters, locations
// and Backups, listed and watched over the loopback client. start runs
// them until stop is closed and waits until they have synced (or stop).
func admissionInformers(loopback *clientrest.Config) (hubadmission.Informers, func(stop <-chan struct{}), error) {
	c := clientrest.CopyConfig(loopback)
	c.UserAgent = "ferry-hub-admission"
	client, err := metadata.NewForConfig(c)
	if err != nil {
		return hubadmission.Informers{}, nil, err
	}
	factory := metadatainformer.NewSharedInformerFactory(client, 0)
	gvr := v1beta1.SchemeGroupVersion.WithResource
	i := hubadmission.Informers{
		Clusters:  factory.ForResource(gvr("clusters")).Informer(),
		Locations: factory.ForResource(gvr("backupstoragelocations")).Informer(),
		Backups:   factory.ForResource(gvr("backups")).Informer(),
	}
	start := func(stop <-chan struct{}) {
		factory.Start(stop)
		factory.WaitForCacheSync(stop)
	}
	return i, start, nil
}
