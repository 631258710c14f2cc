// Package transform holds the small named transforms a restore applies to
// each object before it is written to the target (docs/design.md#transforms). Each
// transform owns one concern, changes the object in place, and returns
// a short note for every change it makes, so that nothing changes silently.
package transform

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/images"
)

// Context is what the transforms need to know about the restore.
type Context struct {
	BackupName  string
	RestoreName string
	// NamespaceMapping maps source to target namespaces.
	NamespaceMapping map[string]string
	// PreserveNodePorts keeps all of Services' nodePorts and
	// healthCheckNodePort, not only those a client set.
	PreserveNodePorts bool
	// KeepStatus keeps .status (resources named in spec.restoreStatus).
	KeepStatus bool
	// PVNames maps source PV names to target PV names (renamed PVs).
	PVNames map[string]string
	// RestoredPVs is the set of source PV names this restore creates.
	RestoredPVs map[string]bool
	// Cloud translates one cloud's annotations, labels and fields to
	// another's (spec.fromCloud, spec.toCloud); nil for none.
	Cloud *CloudTranslation
	// StorageClassMapping maps source storage-class names to target ones.
	StorageClassMapping map[string]string
	// OwnerUIDs maps source UIDs of restored owners to their target UIDs.
	OwnerUIDs func(uid string) (string, bool)
	// Images rewrites image references (spec.imageRegistryMappings); nil
	// for none. OnImageError, if set, gets each reference it cannot rewrite.
	Images       *images.Rewriter
	OnImageError func(error)
	// PodVolumeRestore, if set, makes restored pods wait for their volume data.
	PodVolumeRestore *PodVolumeRestore
	// Quiesced are the workloads a cutover quiesced (spec.quiescedWorkloads).
	Quiesced []v1alpha1.QuiescedWorkload
}

// MapNamespace returns the target name of source namespace ns.
func (c *Context) MapNamespace(ns string) string {
	if t, ok := c.NamespaceMapping[ns]; ok && t != "" {
		return t
	}
	return ns
}

// Func is one transform. It returns notes describing what it changed.
type Func func(c *Context, u *unstructured.Unstructured) []string

// Step is a named transform; Applies selects the objects it runs on
// (group and kind), nil for all.
type Step struct {
	Name    string
	Applies func(group, kind string) bool
	Run     Func
}

// Steps are the built-in transforms in the order they run.
var Steps = []Step{
	// node-ports reads the managedFields that sanitize removes.
	{Name: "node-ports", Applies: kindIs("", "Service"), Run: NodePorts},
	{Name: "sanitize", Run: Sanitize},
	{Name: "namespace-mapping", Run: MapNamespaces},
	{Name: "namespace-selectors", Applies: selectsNamespaces, Run: MapNamespaceSelectors},
	{Name: "namespace-references", Applies: refersToNamespaces, Run: MapNamespaceReferences},
	{Name: "service", Applies: kindIs("", "Service"), Run: Service},
	{Name: "job", Applies: kindIs("batch", "Job"), Run: Job},
	{Name: "pod", Applies: kindIs("", "Pod"), Run: Pod},
	{Name: "pod-volumes", Applies: kindIs("", "Pod"), Run: PodVolumes},
	{Name: "restore-init-hook", Applies: kindIs("", "Pod"), Run: InitHook},
	{Name: "persistent-volume", Applies: kindIs("", "PersistentVolume"), Run: PersistentVolume},
	{Name: "persistent-volume-claim", Applies: kindIs("", "PersistentVolumeClaim"), Run: PersistentVolumeClaim},
	{Name: "service-account-token", Applies: kindIs("", "Secret"), Run: ServiceAccountToken},
	{Name: "certificate-signing-request", Applies: kindIs("certificates.k8s.io", "CertificateSigningRequest"), Run: CertificateSigningRequest},
	{Name: "aggregated-cluster-role", Applies: kindIs("rbac.authorization.k8s.io", "ClusterRole"), Run: AggregatedClusterRole},
	{Name: "quiesced", Applies: isQuiescable, Run: Quiesced},
	{Name: "cloud-profile", Run: Cloud},
	{Name: "storage-class-mapping", Run: StorageClasses},
	{Name: "image-mapping", Run: Images},
	{Name: "labels", Run: Labels},
}

func kindIs(group, kind string) func(string, string) bool {
	return func(g, k string) bool { return g == group && k == kind }
}

// Apply runs every step that applies to u, in order, and returns the notes.
func Apply(c *Context, group string, u *unstructured.Unstructured) []string {
	var notes []string
	kind := u.GetKind()
	for _, s := range Steps {
		if s.Applies != nil && !s.Applies(group, kind) {
			continue
		}
		notes = append(notes, s.Run(c, u)...)
	}
	return notes
}

// LabelValue fits s into a label value (63 characters): longer values are
// cut and suffixed with a hash so they stay unique, as Velero does.
func LabelValue(s string) string {
	if len(s) <= 63 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return strings.TrimRight(s[:56], "-_.") + "-" + hex.EncodeToString(sum[:])[:6]
}
