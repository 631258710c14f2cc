// Package admission is the hub's admission plugin, FerryReferences: the
// checks of a write against other objects, which a kind's strategy cannot
// make from the object alone (sample-apiserver's pattern, with informers).
//
//   - What a Migration, Backup, Restore or Schedule names exists in its
//     namespace: Clusters, BackupStorageLocations, Backups. The informers'
//     caches answer first; a name they do not hold is looked up in storage,
//     so that an object created a moment ago is found.
//   - A namespace has at most one default BackupStorageLocation. The check
//     lists the namespace's locations in storage, and the location storage
//     runs it and the write under one lock (backupstoragelocation.Storage).
//   - A location that reaches object storage with the hub's own access (a
//     file:// URL, the hub's disk; mem://, its memory; or no
//     credentialRef, the hub's own credentials) is written only by a user
//     allowed to "use" the
//     resource hubstorage of ferry.dev in its namespace: another team's
//     data is one such location away.
//   - Images are copied (a Migration's or Backup's mode copy or bundle)
//     and pushed (a Restore's pushImages) with the hub's own registry
//     credentials, so only by a user allowed to "use" hubregistry.
package admission

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/store"
)

// PluginName is the plugin's name.
const PluginName = "FerryReferences"

// HubStorage is the resource (of ferry.dev, verb "use") that a user needs
// in a namespace to write a location there that uses the hub's own access
// to object storage.
const HubStorage = "hubstorage"

// HubRegistry is the resource (of ferry.dev, verb "use") that a user needs
// in a namespace to have the hub copy or push images there: it pulls and
// pushes them with its own registry credentials (its keychain).
const HubRegistry = "hubregistry"

// Storage is where the plugin looks up names its caches do not hold: the
// hub's storages of the kinds.
type Storage struct {
	Clusters, Locations, Backups rest.Getter
	// LocationList lists a namespace's locations, for the one default.
	LocationList rest.Lister
}

// Informers are the caches the plugin reads first, one per kind, keyed
// namespace/name.
type Informers struct {
	Clusters, Locations, Backups cache.SharedIndexInformer
}

// Plugin is the FerryReferences admission plugin: validating, for creates
// and updates of the main resources (not of status).
type Plugin struct {
	*admission.Handler
	authz     authorizer.Authorizer
	storage   *Storage
	informers *Informers
}

var (
	_ admission.ValidationInterface     = &Plugin{}
	_ admission.InitializationValidator = &Plugin{}
)

// New returns the plugin, which asks authz whether a user may use the
// hub's own storage access. It needs SetStorage and SetInformers before
// it serves.
func New(authz authorizer.Authorizer) *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create, admission.Update), authz: authz}
}

// SetStorage sets the storages names are looked up in.
func (p *Plugin) SetStorage(s Storage) { p.storage = &s }

// SetInformers sets the caches; the plugin is ready once they have synced.
func (p *Plugin) SetInformers(i Informers) {
	p.informers = &i
	p.SetReadyFunc(func() bool {
		return i.Clusters.HasSynced() && i.Locations.HasSynced() && i.Backups.HasSynced()
	})
}

// ValidateInitialization says what the plugin was not given.
func (p *Plugin) ValidateInitialization() error {
	switch {
	case p.authz == nil:
		return errors.New(PluginName + ": no authorizer")
	case p.storage == nil:
		return errors.New(PluginName + ": no storage")
	case p.informers == nil:
		return errors.New(PluginName + ": no informers")
	}
	return nil
}

// Validate checks a write of a ferry.dev object against the others.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetSubresource() != "" || a.GetResource().Group != ferry.GroupName {
		return nil
	}
	switch a.GetObject().(type) {
	case *ferry.Migration, *ferry.Backup, *ferry.Schedule, *ferry.Restore, *ferry.BackupStorageLocation:
	default:
		return nil // Clusters, credentials: nothing to look up
	}
	if !p.WaitForReady() {
		return admission.NewForbidden(a, errors.New("not yet ready to handle request"))
	}
	var errs field.ErrorList
	spec := field.NewPath("spec")
	switch o := a.GetObject().(type) {
	case *ferry.Migration:
		var was ferry.MigrationSpec
		if old, ok := a.GetOldObject().(*ferry.Migration); ok {
			was = old.Spec
		}
		errs = p.names(ctx, a, errs, p.clusters(), spec.Child("source", "cluster"), o.Spec.Source.Cluster, was.Source.Cluster)
		errs = p.names(ctx, a, errs, p.clusters(), spec.Child("target", "cluster"), o.Spec.Target.Cluster, was.Target.Cluster)
		if a.GetOperation() == admission.Create { // the spec is immutable
			errs = append(errs, p.hubAccess(ctx, a, o.Spec.Storage.Location, o.Spec.Storage.CredentialRef != nil,
				spec.Child("storage", "location"), spec.Child("storage", "credentialRef"))...)
			errs = append(errs, p.copiesImages(ctx, a, o.Spec.Images.Mode, spec.Child("images", "mode"))...)
		}
	case *ferry.Backup:
		var was ferry.BackupSpec
		if old, ok := a.GetOldObject().(*ferry.Backup); ok {
			was = old.Spec
		}
		errs = p.backupSpec(ctx, a, errs, &o.Spec, &was, spec)
		if o.Spec.Images != was.Images {
			errs = append(errs, p.copiesImages(ctx, a, o.Spec.Images, spec.Child("images"))...)
		}
	case *ferry.Schedule:
		var was ferry.BackupSpec
		if old, ok := a.GetOldObject().(*ferry.Schedule); ok {
			was = old.Spec.Template
		}
		errs = p.backupSpec(ctx, a, errs, &o.Spec.Template, &was, spec.Child("template"))
		if o.Spec.Template.Images != was.Images {
			errs = append(errs, p.copiesImages(ctx, a, o.Spec.Template.Images, spec.Child("template", "images"))...)
		}
	case *ferry.Restore:
		var was ferry.RestoreSpec
		if old, ok := a.GetOldObject().(*ferry.Restore); ok {
			was = old.Spec
		}
		errs = p.names(ctx, a, errs, p.clusters(), spec.Child("cluster"), o.Spec.Cluster, was.Cluster)
		errs = p.names(ctx, a, errs, p.backups(), spec.Child("backupName"), o.Spec.BackupName, was.BackupName)
		if o.Spec.PushImages && !was.PushImages {
			errs = append(errs, p.uses(ctx, a, HubRegistry, spec.Child("pushImages"), "pushing images uses the hub's own registry credentials")...)
		}
	case *ferry.BackupStorageLocation:
		errs = p.location(ctx, a, o)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(a.GetKind().GroupKind(), a.GetName(), errs)
	}
	return nil
}

// backupSpec checks the Cluster and location a Backup's spec (or a
// Schedule's template) names, each unless was names it already.
func (p *Plugin) backupSpec(ctx context.Context, a admission.Attributes, errs field.ErrorList, s, was *ferry.BackupSpec, at *field.Path) field.ErrorList {
	errs = p.names(ctx, a, errs, p.clusters(), at.Child("cluster"), s.Cluster, was.Cluster)
	return p.names(ctx, a, errs, p.locations(), at.Child("storageLocationName"), s.StorageLocationName, was.StorageLocationName)
}

// location checks a BackupStorageLocation: its access to the store, and
// that no other location of its namespace is the default.
func (p *Plugin) location(ctx context.Context, a admission.Attributes, l *ferry.BackupStorageLocation) field.ErrorList {
	spec := field.NewPath("spec")
	var was ferry.BackupStorageLocationSpec
	old, update := a.GetOldObject().(*ferry.BackupStorageLocation)
	if update {
		was = old.Spec
	}
	var errs field.ErrorList
	if !update || l.Spec.URL != was.URL || (l.Spec.CredentialRef == nil) != (was.CredentialRef == nil) {
		errs = p.hubAccess(ctx, a, l.Spec.URL, l.Spec.CredentialRef != nil, spec.Child("url"), spec.Child("credentialRef"))
	}
	if l.Spec.Default {
		errs = append(errs, p.oneDefault(ctx, l, spec.Child("default"))...)
	}
	return errs
}

// oneDefault refuses a second default location in l's namespace: it lists
// them as stored, not as cached, since the last write may not be cached
// yet.
func (p *Plugin) oneDefault(ctx context.Context, l *ferry.BackupStorageLocation, at *field.Path) field.ErrorList {
	list, err := p.storage.LocationList.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return field.ErrorList{field.InternalError(at, fmt.Errorf("listing the namespace's locations: %w", err))}
	}
	for _, o := range list.(*ferry.BackupStorageLocationList).Items {
		if o.Spec.Default && o.Name != l.Name {
			return field.ErrorList{field.Invalid(at, true, fmt.Sprintf("BackupStorageLocation %q is the namespace's default already: unset its spec.default first", o.Name))}
		}
	}
	return nil
}

// hubAccess refuses a location (URL u at urlPath, with or without a
// credentialRef at credPath) that uses the hub's own access to object
// storage, unless the user may use hubstorage in the namespace.
func (p *Plugin) hubAccess(ctx context.Context, a admission.Attributes, u string, credentialRef bool, urlPath, credPath *field.Path) field.ErrorList {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Scheme == "" {
		return nil // the strategy names the bad URL
	}
	var at *field.Path
	var why string
	switch {
	case parsed.Scheme == "file":
		at, why = urlPath, "a file:// location is on the hub's own disk"
	case parsed.Scheme == "mem":
		at, why = urlPath, "a mem:// location is in the hub's own memory (and lost when it stops)"
	case parsed.Scheme == "s3" && parsed.Query().Has("profile"):
		at, why = urlPath, "an s3:// location's profile parameter names a profile of the hub's own AWS configuration"
	case !credentialRef && len(store.CredentialKeys(parsed.Scheme)) > 0:
		at, why = credPath, "without a credentialRef the location uses the hub's own credentials"
	default:
		return nil
	}
	return p.uses(ctx, a, HubStorage, at, why+": use an object store URL with a credentialRef to a Credential of the namespace")
}

// copiesImages refuses an image mode that copies images (copy, bundle)
// unless the user may use hubregistry in the namespace.
func (p *Plugin) copiesImages(ctx context.Context, a admission.Attributes, mode string, at *field.Path) field.ErrorList {
	if mode != "copy" && mode != "bundle" {
		return nil
	}
	return p.uses(ctx, a, HubRegistry, at, "copying images pulls and pushes them with the hub's own registry credentials: use mode record")
}

// uses refuses, at field at, a write whose user may not "use" resource
// of ferry.dev in the namespace; why says what it would use.
func (p *Plugin) uses(ctx context.Context, a admission.Attributes, resource string, at *field.Path, why string) field.ErrorList {
	decision, _, err := p.authz.Authorize(ctx, authorizer.AttributesRecord{User: a.GetUserInfo(), Verb: "use",
		APIGroup: ferry.GroupName, Resource: resource, Namespace: a.GetNamespace(), ResourceRequest: true})
	if err == nil && decision == authorizer.DecisionAllow {
		return nil
	}
	who := "the user"
	if a.GetUserInfo() != nil {
		who = fmt.Sprintf("user %q", a.GetUserInfo().GetName())
	}
	return field.ErrorList{field.Forbidden(at, fmt.Sprintf("%s may not use %s.%s in namespace %q (%s)", who, resource, ferry.GroupName, a.GetNamespace(), why))}
}

// lookup is one kind's cache and storage.
type lookup struct {
	kind     string
	informer cache.SharedIndexInformer
	live     rest.Getter
}

func (p *Plugin) clusters() lookup {
	return lookup{"Cluster", p.informers.Clusters, p.storage.Clusters}
}
func (p *Plugin) locations() lookup {
	return lookup{"BackupStorageLocation", p.informers.Locations, p.storage.Locations}
}
func (p *Plugin) backups() lookup { return lookup{"Backup", p.informers.Backups, p.storage.Backups} }

// names appends to errs a NotFound at path when name, which was does not
// name already, is neither in l's cache nor in its storage.
func (p *Plugin) names(ctx context.Context, a admission.Attributes, errs field.ErrorList, l lookup, path *field.Path, name, was string) field.ErrorList {
	if name == "" || name == was {
		return errs
	}
	if _, ok, err := l.informer.GetIndexer().GetByKey(a.GetNamespace() + "/" + name); err == nil && ok {
		return errs
	}
	if _, err := l.live.Get(ctx, name, &metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return append(errs, field.NotFound(path, name))
		}
		return append(errs, field.InternalError(path, fmt.Errorf("looking up %s %q: %w", l.kind, name, err)))
	}
	return errs
}
