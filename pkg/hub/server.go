package hub

import (
	"context"
	"errors"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	clientrest "k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"

	hubadmission "github.com/kubeferry/ferry/pkg/hub/admission"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/hub/controller"
	"github.com/kubeferry/ferry/pkg/hub/openapi"
	"github.com/kubeferry/ferry/pkg/hub/registry"
	"github.com/kubeferry/ferry/pkg/hub/registry/backup"
	"github.com/kubeferry/ferry/pkg/hub/registry/backupstoragelocation"
	"github.com/kubeferry/ferry/pkg/hub/registry/cluster"
	"github.com/kubeferry/ferry/pkg/hub/registry/clustercredential"
	"github.com/kubeferry/ferry/pkg/hub/registry/credential"
	"github.com/kubeferry/ferry/pkg/hub/registry/event"
	"github.com/kubeferry/ferry/pkg/hub/registry/migration"
	"github.com/kubeferry/ferry/pkg/hub/registry/restore"
	"github.com/kubeferry/ferry/pkg/hub/registry/schedule"
)

// etcdPrefix is where the hub keeps its objects in etcd.
const etcdPrefix = "/ferry-hub"

// Options configure a hub.
type Options struct {
	// DataDir holds the hub's CA, certificates, tokens, encryption key,
	// admin kubeconfig and (unless EtcdServers is set) its etcd data.
	DataDir string
	// BindAddress and SecurePort are where the hub serves HTTPS; port 0
	// picks a free one.
	BindAddress net.IP
	SecurePort  int
	// EtcdServers are the URLs of an existing etcd to use instead of the
	// embedded one.
	EtcdServers []string
	// TokenAuthFiles are more static-token files (CSV, as
	// kube-apiserver's --token-auth-file), besides DataDir's.
	TokenAuthFiles []string
	// Handlers are served on the non-resource mux, by path; a path ending
	// in "/" serves everything under it. They are authorized as
	// non-resource requests.
	Handlers map[string]http.Handler
	// PolicyFile adds the ClusterRoles, Roles, ClusterRoleBindings and
	// RoleBindings (rbac.authorization.k8s.io/v1 YAML) it holds to the
	// default authorization policy (DefaultPolicy); read at start.
	PolicyFile string
	// Controllers, if set, runs the hub's controllers (pkg/hub/controller)
	// in the server, against its own API; Config is filled in.
	Controllers *controller.Options
}

// Server is a hub ready to run: its storage is up.
type Server struct {
	generic *genericapiserver.GenericAPIServer
	etcd    *embeddedEtcd
	unlock  func()
	// controllers, with Options.Controllers, supervises them.
	controllers        *controllers
	controllersStarted atomic.Bool
	// Port is the port the hub serves on.
	Port int
	// Kubeconfig is the admin kubeconfig's path.
	Kubeconfig string
	// EtcdServers are the URLs of the etcd the hub uses (the embedded one's
	// or Options.EtcdServers).
	EtcdServers []string
}

// New prepares the data directory (first start: CA, serving certificate,
// admin token, encryption key), starts the embedded etcd unless
// EtcdServers is set, builds the API server and writes admin.kubeconfig.
// Run serves it; if Run is never called, Close stops etcd.
func New(o Options) (_ *Server, err error) {
	// The policy first: a typo in it is named before anything is made.
	policy, err := LoadPolicy(o.PolicyFile)
	if err != nil {
		return nil, err
	}
	d := dataDir(o.DataDir)
	unlock, err := d.lock()
	if err != nil {
		return nil, err
	}
	s := &Server{unlock: unlock}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	ca, token, err := d.prepare(servingHosts(o.BindAddress))
	if err != nil {
		return nil, err
	}
	servers := o.EtcdServers
	if len(servers) == 0 {
		if s.etcd, err = startEtcd(d.etcd()); err != nil {
			return nil, err
		}
		servers = []string{s.etcd.Endpoint}
	} else if err := checkEtcd(servers); err != nil {
		return nil, err
	}
	s.EtcdServers = servers
	var l net.Listener
	if o.SecurePort == 0 {
		if l, err = net.Listen("tcp", net.JoinHostPort(kubeconfigHost(o.BindAddress), "0")); err != nil {
			return nil, err
		}
	}
	ro := recommendedOptions(o, d, servers, l)
	if errs := ro.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg, authz, err := config(ro, ca, append([]string{d.tokens()}, o.TokenAuthFiles...), policy)
	if err != nil {
		return nil, err
	}
	refs := hubadmission.New(authorizer.AuthorizerFunc(authz.Authorize))
	cfg.AdmissionControl = refs
	s.Port = ro.SecureServing.BindPort
	handlers := map[string]http.Handler{}
	for p, h := range o.Handlers {
		handlers[p] = h
	}
	completed := cfg.Complete()
	// Complete authenticates the loopback token as a user of its own;
	// ours, put in front, is the one the authorizer knows by UID.
	authorizeLoopback(completed.LoopbackClientConfig, &completed.Authentication, authz)
	locker := backupstoragelocation.EtcdLocker{Endpoints: servers, Prefix: etcdPrefix + "-locks/backupstoragelocations/"}
	if s.generic, err = newGeneric(completed, handlers, refs, locker); err != nil {
		return nil, err
	}
	if o.Controllers != nil {
		copts := *o.Controllers
		copts.Config = clientrest.CopyConfig(cfg.LoopbackClientConfig)
		if copts.Identity == "" {
			// One identity for the process: a restarted controller
			// manager goes on with the leases it holds.
			copts.Identity = controller.NewIdentity()
		}
		if copts.Runs == nil {
			// ... once the runs of the stopped one have ended.
			copts.Runs = controller.NewRuns()
		}
		s.controllers = &controllers{opts: copts, done: make(chan struct{}), quit: make(chan struct{})}
		if err := s.generic.AddReadyzChecks(s.controllers.check()); err != nil {
			return nil, err
		}
		s.generic.AddPostStartHookOrDie("ferry-hub-controllers", func(hc genericapiserver.PostStartHookContext) error {
			s.controllersStarted.Store(true)
			go s.controllers.run(hc)
			return nil
		})
	}
	s.Kubeconfig = AdminKubeconfig(o.DataDir)
	if err := d.writeAdminKubeconfig(kubeconfigHost(o.BindAddress), s.Port, ca.PEM, token); err != nil {
		return nil, err
	}
	return s, nil
}

// LoopbackConfig is the hub's own client config, the identity its
// controllers use: the one that may read ClusterCredentials and
// Credentials. It is for callers in the hub's process.
func (s *Server) LoopbackConfig() *clientrest.Config {
	return clientrest.CopyConfig(s.generic.LoopbackClientConfig)
}

// Run serves until ctx is done, then stops the controllers, the server
// and the embedded etcd, in that order: the controllers' watches of the
// server end before it stops serving.
func (s *Server) Run(ctx context.Context) error {
	defer s.Close()
	serving, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
		case <-serving.Done():
			return
		}
		if s.controllers != nil {
			s.controllers.shutdown(s.controllersStarted.Load())
		}
		stop()
	}()
	return s.generic.PrepareRun().RunWithContext(serving)
}

// Close stops the embedded etcd, if any, and releases the data directory.
func (s *Server) Close() {
	if s.etcd != nil {
		s.etcd.Stop()
		s.etcd = nil
	}
	if s.unlock != nil {
		s.unlock()
		s.unlock = nil
	}
}

// recommendedOptions are k8s.io/apiserver's RecommendedOptions for a
// server of its own: no delegated authentication or authorization, no
// kube-apiserver core API client (CoreAPI: the hub serves its own core/v1
// Events, newGeneric), none of kube-apiserver's admission plugins (the
// hub's own is FerryReferences, pkg/hub/admission), no priority and
// fairness (they all need a kube-apiserver behind), the hub's etcd,
// certificate and encryption.
func recommendedOptions(o Options, d dataDir, servers []string, listener net.Listener) *genericoptions.RecommendedOptions {
	ro := genericoptions.NewRecommendedOptions(etcdPrefix, Codecs.LegacyCodec(v1beta1.SchemeGroupVersion, corev1.SchemeGroupVersion))
	// ferry.dev kinds are stored at v1beta1, Events at core/v1.
	ro.Etcd.StorageConfig.EncodeVersioner = schema.GroupVersions{v1beta1.SchemeGroupVersion, corev1.SchemeGroupVersion}
	ro.Etcd.StorageConfig.Transport.ServerList = servers
	ro.Etcd.EncryptionProviderConfigFilepath = d.encryption()
	ro.SecureServing.BindAddress = o.BindAddress
	ro.SecureServing.BindPort = o.SecurePort
	if o.SecurePort == 0 {
		// k8s.io/apiserver reads port 0 as "do not serve": listen on a
		// free port here instead.
		ro.SecureServing.Listener = listener
	}
	ro.SecureServing.ServerCert.CertKey = genericoptions.CertKey{CertFile: d.servingCert(), KeyFile: d.servingKey()}
	ro.Authentication = nil
	ro.Authorization = nil
	ro.CoreAPI = nil
	ro.Admission = nil
	ro.Features.EnablePriorityAndFairness = false
	ro.Features.EnableProfiling = false
	return ro
}

// config is the RecommendedConfig of ro, with the hub's authentication
// (client certificates of ca, the tokens of tokenFiles), its authorizer,
// and OpenAPI v2 and v3.
func config(ro *genericoptions.RecommendedOptions, ca *CA, tokenFiles []string, policy *Policy) (*genericapiserver.RecommendedConfig, *hubAuthorizer, error) {
	cfg := genericapiserver.NewRecommendedConfig(Codecs)
	cfg.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString(baseversion.DefaultKubeBinaryVersion, "", "")
	namer := openapinamer.NewDefinitionNamer(Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title, cfg.OpenAPIConfig.Info.Version = "ferry hub", v1beta1.SchemeGroupVersion.Version
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title, cfg.OpenAPIV3Config.Info.Version = "ferry hub", v1beta1.SchemeGroupVersion.Version
	if err := ro.ApplyTo(cfg); err != nil {
		return nil, nil, err
	}
	// On SIGTERM, watches (kubectl get -w, ferry migrate --wait) are
	// ended within seconds instead of holding the stop for a minute; their
	// clients watch again.
	cfg.ShutdownWatchTerminationGracePeriod = 5 * time.Second
	authn, err := newAuthenticator(ca, tokenFiles)
	if err != nil {
		return nil, nil, err
	}
	cfg.Authentication.Authenticator = authn
	clientCA, err := dynamiccertificates.NewStaticCAContent("ferry-hub-ca", ca.PEM)
	if err != nil {
		return nil, nil, err
	}
	if err := cfg.Authentication.ApplyClientCert(clientCA, cfg.SecureServing); err != nil {
		return nil, nil, err
	}
	authz := &hubAuthorizer{policy: policy}
	cfg.Authorization.Authorizer = authorizer.AuthorizerFunc(authz.Authorize)
	// The loopback client (the hub's controllers, the reports handler)
	// authenticates with a token of the server's own (authorizeLoopback,
	// once the config is completed).
	return cfg, authz, nil
}

// newGeneric builds the generic API server and installs ferry.dev in both
// versions (v1beta1 preferred and stored) and handlers; refs, the
// admission plugin, gets the storages and its informers, which a
// post-start hook starts.
func newGeneric(c genericapiserver.CompletedConfig, handlers map[string]http.Handler, refs *hubadmission.Plugin, locker backupstoragelocation.Locker) (*genericapiserver.GenericAPIServer, error) {
	g, err := c.New("ferry-hub", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	informers, startInformers, err := admissionInformers(c.LoopbackClientConfig)
	if err != nil {
		return nil, err
	}
	refs.SetInformers(informers)
	// /readyz fails until the hook returns, once the caches have synced.
	g.AddPostStartHookOrDie("ferry-admission-informers", func(hc genericapiserver.PostStartHookContext) error {
		startInformers(hc.Done())
		// Started: a mostly idle API server keeps less garbage at GOGC
		// 50 for little CPU (docs/benchmarks.md#hub-results); the start's
		// heavy allocations ran at Go's default. $GOGC overrides it.
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(50)
		}
		return nil
	})
	clusters, clusterStatus, err := cluster.NewREST(Scheme, c.RESTOptionsGetter)
	if err != nil {
		return nil, err
	}
	creds, err := clustercredential.NewREST(Scheme, c.RESTOptionsGetter)
	if err != nil {
		return nil, err
	}
	credentials, err := credential.NewREST(Scheme, c.RESTOptionsGetter)
	if err != nil {
		return nil, err
	}
	migrations, migrationStatus, err := migration.NewREST(Scheme, c.RESTOptionsGetter)
	if err != nil {
		return nil, err
	}
	storage := map[string]rest.Storage{
		"clusters":           clusters,
		"clusters/status":    clusterStatus,
		"clustercredentials": creds,
		"credentials":        credentials,
		"migrations":         migrations,
		"migrations/status":  migrationStatus,
		"migrations/report":  migration.NewReportREST(migrations, (&reportOpener{config: c.LoopbackClientConfig}).open),
	}
	// v1alpha1 serves the kinds it was released with; server mode's kinds
	// came later and are served at v1beta1 only, so that ferry.dev/v1alpha1
	// Backup, Restore, Schedule and BackupStorageLocation are server mode's
	// CRDs alone: one schema per GroupVersionKind.
	alpha := maps.Clone(storage)
	if err := addBackupKinds(c, storage, clusters, refs, locker); err != nil {
		return nil, err
	}
	if err := refs.ValidateInitialization(); err != nil {
		return nil, err
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(ferry.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	group.VersionedResourcesStorageMap["v1beta1"] = storage
	group.VersionedResourcesStorageMap["v1alpha1"] = alpha
	if err := g.InstallAPIGroup(&group); err != nil {
		return nil, err
	}
	// core/v1 Events, at /api/v1, where kubectl describe and kubectl
	// events look for them.
	events, err := event.NewREST(Scheme, c.RESTOptionsGetter)
	if err != nil {
		return nil, err
	}
	core := genericapiserver.NewDefaultAPIGroupInfo("", Scheme, metav1.ParameterCodec, Codecs)
	core.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{"events": registry.WithShortNames{Store: events, Names: []string{"ev"}}}
	if err := g.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &core); err != nil {
		return nil, err
	}
	for path, h := range handlers {
		if strings.HasSuffix(path, "/") {
			g.Handler.NonGoRestfulMux.HandlePrefix(path, h)
		} else {
			g.Handler.NonGoRestfulMux.Handle(path, h)
		}
	}
	return g, nil
}

// addBackupKinds adds the storages of the kinds of server mode:
// BackupStorageLocations, Backups, Restores and Schedules; refs looks
// names up in them and in clusters.
func addBackupKinds(c genericapiserver.CompletedConfig, storage map[string]rest.Storage, clusters rest.Getter, refs *hubadmission.Plugin, locker backupstoragelocation.Locker) error {
	locations, locationStatus, err := backupstoragelocation.NewREST(Scheme, c.RESTOptionsGetter, locker)
	if err != nil {
		return err
	}
	backups, backupStatus, err := backup.NewREST(Scheme, c.RESTOptionsGetter)
	if err != nil {
		return err
	}
	restores, restoreStatus, err := restore.NewREST(Scheme, c.RESTOptionsGetter)
	if err != nil {
		return err
	}
	schedules, scheduleStatus, err := schedule.NewREST(Scheme, c.RESTOptionsGetter)
	if err != nil {
		return err
	}
	refs.SetStorage(hubadmission.Storage{Clusters: clusters, Locations: locations, Backups: backups, LocationList: locations})
	maps.Copy(storage, map[string]rest.Storage{
		"backupstoragelocations":        locations,
		"backupstoragelocations/status": locationStatus,
		"backups":                       backups,
		"backups/status":                backupStatus,
		"restores":                      restores,
		"restores/status":               restoreStatus,
		"schedules":                     schedules,
		"schedules/status":              scheduleStatus,
	})
	return nil
}

// servingHosts are the names and addresses of the serving certificate.
func servingHosts(bind net.IP) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name)
	}
	if bind != nil && !bind.IsUnspecified() && !bind.IsLoopback() {
		hosts = append(hosts, bind.String())
	}
	return hosts
}

// kubeconfigHost is the address admin.kubeconfig names.
func kubeconfigHost(bind net.IP) string {
	if bind == nil || bind.IsUnspecified() {
		return "127.0.0.1"
	}
	return bind.String()
}
