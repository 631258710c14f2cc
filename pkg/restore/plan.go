package restore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/archive"
	"github.com/kubeferry/ferry/pkg/filter"
)

// peek is the part of an object the planner reads. The full object is
// read from the archive's spool and decoded only when it is applied, and
// of the peek an Item keeps only what the applier needs too (owners, a
// PV's claim), so memory holds little of each object
// (docs/design.md#restore-flow).
type peek struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		UID               string                  `json:"uid"`
		Labels            selectedKeys            `json:"labels"`
		Annotations       selectedKeys            `json:"annotations"`
		OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
		DeletionTimestamp *string                 `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		ClaimRef   *claimRef       `json:"claimRef"`
		SignerName string          `json:"signerName"`
		Selector   json.RawMessage `json:"selector"`
	} `json:"spec"`
}

// claimRef is a PersistentVolume's spec.claimRef.
type claimRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// plannerKeys are the only labels and annotations the planner reads.
var plannerKeys = map[string]bool{
	"endpointslice.kubernetes.io/managed-by": true,
	"kubernetes.io/service-name":             true,
	"pv.kubernetes.io/provisioned-by":        true,
}

// selectedKeys decodes a label or annotation map keeping only plannerKeys,
// so that a plan of many objects does not hold every label in memory.
type selectedKeys map[string]string

// UnmarshalJSON keeps the planner's keys.
func (s *selectedKeys) UnmarshalJSON(b []byte) error {
	var all map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for k, v := range all {
		if plannerKeys[k] {
			if *s == nil {
				*s = selectedKeys{}
			}
			(*s)[k] = v
		}
	}
	return nil
}

// Item is one planned restore item: the archive's item (its entry, and
// its bytes in the spool) and what the plan decided for it.
type Item struct {
	*archive.Item
	GroupResource   string
	Tier            int
	TargetNamespace string
	TargetName      string
	// Skip is the reason the item is not applied ("" when it is).
	Skip string
	// KeepStatus is true for resources named in spec.restoreStatus.
	KeepStatus bool
	// SourceVersion is the version the backup holds the object at as its
	// primary copy: the source's preferred version.
	SourceVersion string
	// Others are copies of the same object at the source's other served
	// versions (resources/<gr>/<version>/...), for a target that does not
	// serve SourceVersion.
	Others []*archive.Item

	// Of the object (peek): its owners, and a PV's claim.
	owners   []metav1.OwnerReference
	claimRef *claimRef
	// targetUID is the object's UID in the target once applied (or
	// found), for the owners of other items only (Plan.byUID).
	targetUID atomic.Pointer[string]
	// done is set once the item is finished.
	done atomic.Bool
	// owner is true for an item that other items name as owner.
	owner bool
	// early is set for a claim created before its owners (applier.run),
	// and adopt holds its references to those owners (source UIDs), set
	// once they are restored (applier.adoptClaims).
	early bool
	adopt []metav1.OwnerReference
}

// setTargetUID records the object's UID in the target, if it owns items
// of the plan.
func (it *Item) setTargetUID(uid string) {
	if it.owner {
		it.targetUID.Store(&uid)
	}
}

// Plan is the ordered restore plan.
type Plan struct {
	Items []*Item
	// PVNames maps source PV names to new names (PVs bound to claims in
	// mapped namespaces are renamed so a clone cannot take the original's volume).
	PVNames map[string]string
	// RestoredPVs is the set of source PV names this restore applies.
	RestoredPVs map[string]bool
	// byUID indexes the planned items that own other planned items by
	// their source UID (for owner references).
	byUID map[string]*Item
	// Warnings are options that match nothing in the backup (a namespace
	// mapping or an included namespace the backup does not have): a typo
	// must not pass for a restore that did what was asked.
	Warnings []string
}

// recreatedBy lists, per kind of dependent, the built-in controllers
// (owner kinds) that create it from their own spec
// (docs/design.md#left-to-controllers-and-never-restored): a Deployment's ReplicaSets, the Pods of ReplicaSets,
// StatefulSets, DaemonSets, Jobs and ReplicationControllers, the
// ControllerRevisions of StatefulSets and DaemonSets, a CronJob's Jobs.
// Anything else a workload owns (a ConfigMap, an HPA) is not recreated
// and is restored.
var recreatedBy = map[string]map[string]bool{
	"replicasets.apps":         {"apps/Deployment": true},
	"pods":                     {"apps/ReplicaSet": true, "apps/StatefulSet": true, "apps/DaemonSet": true, "batch/Job": true, "/ReplicationController": true},
	"controllerrevisions.apps": {"apps/StatefulSet": true, "apps/DaemonSet": true},
	"jobs.batch":               {"batch/CronJob": true},
}

// managedEndpointSlices are the managed-by values of EndpointSlices that a
// controller of the target recreates.
var managedEndpointSlices = map[string]bool{
	"endpointslice-controller.k8s.io":          true,
	"endpointslicemirroring-controller.k8s.io": true,
}

// objectKey identifies one object across its version copies.
type objectKey struct{ gr, ns, name string }

// splitCopies sorts an archive's items into one primary copy per object and
// the object's copies at other versions. The primary copy is the one at
// the source's preferred version: ferry's unversioned path, or Velero's
// <v>-preferredversion directory (Velero writes the preferred version at
// both; the unversioned copy of a Velero archive is then a duplicate). An
// object with no primary copy gets its first other copy promoted. The
// copies point into items.
func splitCopies(items []archive.Item) ([]*archive.Item, map[objectKey][]*archive.Item) {
	key := func(ai *archive.Item) objectKey { return objectKey{ai.GroupResource(), ai.Namespace, ai.Name} }
	dirs := make([]string, len(items))
	versioned := map[objectKey]bool{} // objects with a copy under a version directory
	for i := range items {
		if _, dirs[i], _, _, _ = archive.ParseItemPath(items[i].Path); dirs[i] != "" {
			versioned[key(&items[i])] = true
		}
	}
	primary := map[objectKey]int{}
	explicit := map[objectKey]bool{}
	prim := make([]*archive.Item, 0, len(items))
	others := map[objectKey][]*archive.Item{}
	for i := range items {
		ai, dir := &items[i], dirs[i]
		if dir == "" && (len(versioned) == 0 || !versioned[key(ai)]) {
			prim = append(prim, ai) // the only copy (paths are unique)
			continue
		}
		k := key(ai)
		preferredDir := strings.HasSuffix(dir, "-preferredversion")
		if dir != "" && !preferredDir {
			others[k] = append(others[k], ai)
			continue
		}
		if j, ok := primary[k]; ok {
			if preferredDir && !explicit[k] {
				prim[j] = ai
				explicit[k] = true
			}
			continue
		}
		primary[k] = len(prim)
		explicit[k] = preferredDir
		prim = append(prim, ai)
	}
	for k, o := range others {
		if _, ok := primary[k]; !ok {
			primary[k] = len(prim)
			prim = append(prim, o[0])
			others[k] = o[1:]
		}
	}
	return prim, others
}

// buildPlan selects, orders and annotates the archive's items. The plan's
// items point into items.
func buildPlan(items []archive.Item, o *Options) (*Plan, error) {
	nsf, err := filter.NewNamespaces(o.Spec.IncludedNamespaces, o.Spec.ExcludedNamespaces)
	if err != nil {
		return nil, err
	}
	resf := filter.NewResources(o.Spec.IncludedResources, o.Spec.ExcludedResources)
	statusf := filter.NewResources(o.Spec.RestoreStatus, nil)
	p := &Plan{PVNames: map[string]string{}, RestoredPVs: map[string]bool{}, byUID: map[string]*Item{}}
	selectorServices := map[string]bool{}
	prim, others := splitCopies(items)
	p.Warnings = unmatchedNamespaces(prim, nsf, o)
	p.Items = make([]*Item, 0, len(prim))
	grs := map[string]string{} // one string per group-resource
	for _, ai := range prim {
		gr := ai.GroupResource()
		if v, ok := grs[gr]; ok {
			gr = v
		} else {
			grs[gr] = gr
		}
		it := &Item{Item: ai, GroupResource: gr}
		if len(others) > 0 {
			it.Others = others[objectKey{gr, ai.Namespace, ai.Name}]
		}
		pk, err := readPeek(ai)
		if err != nil {
			return nil, err
		}
		it.owners, it.claimRef = pk.Metadata.OwnerReferences, pk.Spec.ClaimRef
		kind := pk.Kind
		if kind == "" {
			kind = ai.Kind
		}
		if it.Version == "" {
			// A Velero legacy path names no version: the object's own does.
			_, it.Version = splitAPIVersion(pk.APIVersion)
		}
		it.SourceVersion = it.Version
		filtered := ""
		switch {
		case !resf.Match(ai.Group, ai.Resource, kind):
			filtered = "excluded by the resource filters"
		case ai.Namespace != "" && !nsf.Match(ai.Namespace), it.GroupResource == "namespaces" && !nsf.Match(ai.Name):
			filtered = "excluded by the namespace filters"
		}
		if filtered != "" {
			if o.keepFiltered {
				// A verification lists what the restore left out.
				it.Skip, it.TargetNamespace, it.TargetName = filtered, ai.Namespace, ai.Name
				p.Items = append(p.Items, it)
			}
			continue
		}
		it.Tier = tier(it.GroupResource)
		it.TargetNamespace = ai.Namespace
		if ai.Namespace != "" {
			it.TargetNamespace = o.mapNamespace(ai.Namespace)
		}
		it.TargetName = ai.Name
		if it.GroupResource == "namespaces" {
			it.TargetName = o.mapNamespace(ai.Name)
		}
		it.KeepStatus = len(o.Spec.RestoreStatus) > 0 && statusf.Explicit(ai.Group, ai.Resource, kind)
		if it.GroupResource == "services" && len(pk.Spec.Selector) > 2 && string(pk.Spec.Selector) != "null" {
			selectorServices[ai.Namespace+"/"+ai.Name] = true
		}
		it.Skip = skipReason(it, pk)
		if pk.Metadata.UID != "" {
			p.byUID[pk.Metadata.UID] = it
		}
		p.Items = append(p.Items, it)
	}
	for _, it := range p.Items {
		if it.Skip == "" && it.GroupResource == "endpoints" && selectorServices[it.Namespace+"/"+it.Name] {
			it.Skip = "left to controllers: endpoints of a selector Service"
		}
	}
	p.keepOwners()
	// Owners left to controllers make their dependents left to controllers too.
	for _, it := range p.Items {
		if it.Skip == "" {
			if r := p.leftToController(it, 0); r != "" {
				it.Skip = r
			}
		}
	}
	for _, it := range p.Items {
		if it.GroupResource != "persistentvolumes" || it.Skip != "" {
			continue
		}
		p.RestoredPVs[it.Name] = true
		if cr := it.claimRef; cr != nil && cr.Namespace != "" && o.mapNamespace(cr.Namespace) != cr.Namespace {
			p.PVNames[it.Name] = clonedPVName(it.Name, o.mapNamespace(cr.Namespace))
			it.TargetName = p.PVNames[it.Name]
		}
	}
	sort.SliceStable(p.Items, func(i, j int) bool { return p.Items[i].Tier < p.Items[j].Tier })
	return p, nil
}

// readPeek reads the planner's part of item ai from the spool.
func readPeek(ai *archive.Item) (*peek, error) {
	data, err := ai.Read()
	if err != nil {
		return nil, err
	}
	pk := &peek{}
	if err := json.Unmarshal(data, pk); err != nil {
		return nil, fmt.Errorf("archive entry %s: not a JSON object: %w", ai.Path, err)
	}
	return pk, nil
}

// keepOwners leaves in byUID only the items that other items of the plan
// name as owners, and marks them: a plan of many objects keeps the UIDs
// of few.
func (p *Plan) keepOwners() {
	owners := map[string]*Item{}
	for _, it := range p.Items {
		for _, ref := range it.owners {
			if o := p.byUID[string(ref.UID)]; o != nil {
				o.owner = true
				owners[string(ref.UID)] = o
			}
		}
	}
	p.byUID = owners
}

// unmatchedNamespaces warns of the namespaces a restore's namespace
// mapping or included namespaces name that the backup does not have.
func unmatchedNamespaces(items []*archive.Item, nsf *filter.Namespaces, o *Options) []string {
	backupNS := map[string]bool{}
	for _, ai := range items {
		if ai.Namespace != "" {
			backupNS[ai.Namespace] = true
		} else if ai.GroupResource() == "namespaces" {
			backupNS[ai.Name] = true
		}
	}
	var warnings []string
	for _, src := range slices.Sorted(maps.Keys(o.Spec.NamespaceMapping)) {
		if !backupNS[src] {
			warnings = append(warnings, fmt.Sprintf("spec.namespaceMapping[%s]: %q: the backup has no namespace %s", src, o.Spec.NamespaceMapping[src], src))
		}
	}
	if literal, ok := nsf.Literal(); ok {
		for _, ns := range literal {
			if !backupNS[ns] {
				warnings = append(warnings, fmt.Sprintf("spec.includedNamespaces: %q: the backup has no namespace %s", ns, ns))
			}
		}
	}
	return warnings
}

// clonedPVName is the deterministic new name of PV name whose claim moved
// to namespace ns: the same restore run twice gives the same name.
func clonedPVName(name, ns string) string {
	sum := sha256.Sum256([]byte(ns + "/" + name))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	if len(name)+len(suffix) > 253 {
		name = name[:253-len(suffix)]
	}
	return name + suffix
}

// skipReason returns why an item is never applied, or "" (the endpoints
// of a selector Service are found once every Service is planned).
func skipReason(it *Item, pk *peek) string {
	if r, ok := neverRestored[it.GroupResource]; ok {
		return "never restored: " + r
	}
	if pk.Metadata.DeletionTimestamp != nil {
		return "being deleted in the source"
	}
	ns, name := it.Namespace, it.Name
	switch it.GroupResource {
	case "configmaps":
		if name == "kube-root-ca.crt" {
			return "never restored: published by the target's root-ca controller"
		}
		if ns == "kube-system" && name == "extension-apiserver-authentication" {
			return "never restored: written by the target's API server"
		}
	case "services", "endpoints":
		if ns == "default" && name == "kubernetes" {
			return "never restored: the target's API server manages it"
		}
	case "endpointslices.discovery.k8s.io":
		if by := pk.Metadata.Labels["endpointslice.kubernetes.io/managed-by"]; managedEndpointSlices[by] {
			return "left to controllers: managed by " + by
		}
		if ns == "default" && pk.Metadata.Labels["kubernetes.io/service-name"] == "kubernetes" {
			return "never restored: the target's API server manages it"
		}
	case "clustertrustbundles.certificates.k8s.io":
		if pk.Spec.SignerName == "kubernetes.io/kube-apiserver-serving" {
			return "never restored: published by the target's kube-controller-manager"
		}
	case "persistentvolumes":
		if prov := pk.Metadata.Annotations["pv.kubernetes.io/provisioned-by"]; prov != "" {
			return "dynamically provisioned by " + prov + " in the source: the target provisions a new volume for its claim"
		}
	}
	return ""
}

// leftToController reports whether a controller owner of it (a built-in
// workload kind, or any owner for ControllerRevisions) is in the plan and
// will be restored or recreated; its controller then recreates it.
func (p *Plan) leftToController(it *Item, depth int) string {
	if depth > 10 {
		return ""
	}
	for _, ref := range it.owners {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		gv, _ := splitAPIVersion(ref.APIVersion)
		owner, ok := p.byUID[string(ref.UID)]
		if !ok {
			continue
		}
		if !recreatedBy[it.GroupResource][gv+"/"+ref.Kind] {
			continue
		}
		if owner.Skip == "" || p.leftToController(owner, depth+1) != "" {
			return "left to controllers: " + ref.Kind + " " + ref.Name + " recreates it"
		}
	}
	return ""
}

func splitAPIVersion(av string) (group, version string) {
	for i := len(av) - 1; i >= 0; i-- {
		if av[i] == '/' {
			return av[:i], av[i+1:]
		}
	}
	return "", av
}
