package restore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/modifiers"
	"github.com/kubeferry/ferry/pkg/report"
	"github.com/kubeferry/ferry/pkg/transform"
)

// applier writes a plan into the target, tier by tier.
type applier struct {
	cluster    *kube.Cluster
	opts       *Options
	plan       *Plan
	results    *report.Results
	apis       *kube.APIs
	tctx       transform.Context
	namespaces sync.Map // target namespace -> true once known to exist
	nsMu       sync.Mutex
	done       atomic.Int64
	total      int
	unserved   sync.Map // group-resource -> why, for the summary warnings
	// versionChanges holds the group-resources restored at a version
	// other than the source's preferred one (warned once each).
	versionChanges sync.Map
	// verifying compares each item with the target instead of applying it.
	verifying bool
	modifiers *modifiers.Rules
	// inFlight bounds the bytes of the objects being applied at once
	// (maxInFlightBytes), whatever their size.
	inFlight *semaphore.Weighted
	// beforeWorkloads, if set, runs once the tiers before the workloads
	// are applied (claim data goes in before anything mounts a claim). It
	// returns, for a workload, why it must not be created ("" if it may):
	// a claim it mounts did not get its data.
	beforeWorkloads func(ctx context.Context) func(*Item) string
}

func newApplier(c *kube.Cluster, o *Options, backup string, p *Plan, res *report.Results) *applier {
	a := &applier{cluster: c, opts: o, plan: p, results: res, total: len(p.Items), inFlight: semaphore.NewWeighted(maxInFlightBytes)}
	res.Grow(len(p.Items))
	if o.Spec.ResourceModifiers != "" {
		a.modifiers, _ = modifiers.Parse([]byte(o.Spec.ResourceModifiers)) // Validate parsed it
	}
	a.tctx = transform.Context{
		BackupName: backup, RestoreName: o.Name, NamespaceMapping: o.Spec.NamespaceMapping,
		PreserveNodePorts: o.Spec.PreserveNodePorts, PVNames: p.PVNames, RestoredPVs: p.RestoredPVs,
		StorageClassMapping: o.Spec.StorageClassMapping, Quiesced: o.Spec.QuiescedWorkloads,
		Cloud: mustCloud(o.Spec.FromCloud, o.Spec.ToCloud),
		OwnerUIDs: func(uid string) (string, bool) {
			if owner := p.byUID[uid]; owner != nil {
				if v := owner.targetUID.Load(); v != nil {
					return *v, true
				}
			}
			return "", false
		},
	}
	return a
}

// mustCloud loads the cloud translation Validate already checked.
func mustCloud(from, to string) *transform.CloudTranslation {
	ct, _ := transform.NewCloudTranslation(from, to)
	return ct
}

func (a *applier) finish(it *Item, res report.Result) {
	res.Resource = it.GroupResource
	if res.Version == "" {
		res.Version = it.Version
	}
	res.Namespace, res.Name = it.Namespace, it.Name
	if it.TargetNamespace != it.Namespace {
		res.TargetNamespace = it.TargetNamespace
	}
	if it.TargetName != it.Name {
		res.TargetName = it.TargetName
	}
	a.results.Add(res)
	it.done.Store(true)
	n := a.done.Add(1)
	if a.opts.OnProgress != nil {
		a.opts.OnProgress(int(n), a.total)
	}
}

// run applies every tier in order. Items whose owners (in this plan) are
// not yet applied wait for a later wave, so that their ownerReferences can
// carry the owners' new UIDs.
func (a *applier) run(ctx context.Context) error {
	apis, err := kube.Discover(a.cluster.Discovery)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", a.cluster.Name, err)
	}
	a.apis = apis
	for _, w := range a.plan.Warnings {
		a.results.Warnf("%s", w)
	}
	var pending []*Item
	byTier := make([][]*Item, numTiers)
	for _, it := range a.plan.Items {
		if it.Skip != "" {
			a.finish(it, report.Result{Outcome: report.Skipped, Reason: it.Skip})
			continue
		}
		byTier[it.Tier] = append(byTier[it.Tier], it)
	}
	for t := 0; t < numTiers; t++ {
		if t == tierWorkload && a.beforeWorkloads != nil && !a.opts.Spec.DryRun && !a.verifying && ctx.Err() == nil {
			byTier[t] = a.holdBack(byTier[t], a.beforeWorkloads(ctx))
		}
		pending = append(pending, byTier[t]...)
		tierStart := time.Now()
		if len(byTier[t]) > 0 {
			a.opts.Log.Info("restoring tier", "tier", tierNames[t], "items", len(byTier[t]))
		}
		for len(pending) > 0 {
			var ready, wait []*Item
			for _, it := range pending {
				if a.ownersDone(it) || a.beforeOwners(it) {
					ready = append(ready, it)
				} else {
					wait = append(wait, it)
				}
			}
			if len(ready) == 0 {
				break // owners are in a later tier
			}
			if err := a.applyAll(ctx, ready); err != nil {
				return err
			}
			pending = wait
		}
		if t == tierCRD && len(byTier[t]) > 0 && !a.opts.Spec.DryRun && !a.verifying {
			a.waitForCRDs(ctx, byTier[t])
		}
		if len(byTier[t]) > 0 {
			a.opts.Log.Info("tier done", "tier", tierNames[t], "took", time.Since(tierStart).Round(time.Millisecond))
		}
	}
	// Owners that never came (failed): apply without those references.
	err = a.applyAll(ctx, pending)
	if ctx.Err() == nil {
		a.adoptClaims(ctx)
	}
	if a.opts.Spec.DryRun {
		a.checkQuotas(ctx)
	}
	// Objects the target cannot take must not hide in the item list.
	a.unserved.Range(func(gr, why any) bool {
		a.results.Warnf("%s: every object skipped: %s", gr, why)
		return true
	})
	return err
}

// holdBack fails the items hold gives a reason for, and returns the others.
func (a *applier) holdBack(items []*Item, hold func(*Item) string) []*Item {
	var keep []*Item
	for _, it := range items {
		if why := hold(it); why != "" {
			a.finish(it, report.Result{Outcome: report.Failed, Reason: why})
			continue
		}
		keep = append(keep, it)
	}
	return keep
}

// beforeOwners says whether it, whose owners are not all restored yet, is
// created now anyway: a claim is, without its references to those owners
// (adoptClaims sets them once the owners exist). A StatefulSet whose
// persistentVolumeClaimRetentionPolicy deletes its claims owns them, and
// the claims must exist, and hold their data, before the StatefulSet
// starts pods on them. A claim is never created with a reference to an
// owner that does not exist yet: the target's garbage collector would
// delete it (velero#7862).
func (a *applier) beforeOwners(it *Item) bool {
	if it.GroupResource != "persistentvolumeclaims" || a.opts.Spec.DryRun || a.verifying {
		return false
	}
	it.early = true
	return true
}

func (a *applier) ownersDone(it *Item) bool {
	for _, ref := range it.owners {
		owner, ok := a.plan.byUID[string(ref.UID)]
		if !ok || owner.Skip != "" {
			continue
		}
		if !owner.done.Load() {
			return false
		}
	}
	return true
}

// maxInFlightBytes bounds the archive bytes of the objects that the
// workers hold at once: each holds its object read from the spool, decoded,
// encoded and the API server's answer, so a tier of 1 MiB Secrets must
// not have every worker at that (docs/design.md#restore-flow). One object
// larger than the bound goes alone.
const maxInFlightBytes = 8 << 20

func (a *applier) applyAll(ctx context.Context, items []*Item) error {
	ch := make(chan *Item)
	var wg sync.WaitGroup
	for i := 0; i < a.opts.Workers && i < len(items); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				n := min(max(it.Size, 1), maxInFlightBytes)
				if a.inFlight.Acquire(ctx, n) != nil {
					n = 0 // canceled: the item fails as the API call would
				}
				if a.verifying {
					a.finish(it, a.verify(ctx, it))
				} else {
					a.finish(it, a.apply(ctx, it))
				}
				a.inFlight.Release(n)
			}
		}()
	}
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		ch <- it
	}
	close(ch)
	wg.Wait()
	return ctx.Err()
}

// resolve picks the version to restore it at (docs/design.md#api-versions):
// the source's preferred version (the primary copy) if the
// target serves it; otherwise the first of the target's served versions,
// in the target's priority order (its preferred version first, then the
// order discovery gives, which the API server sorts by version priority),
// that the backup also holds a copy at; otherwise none, with the reason.
// This is Velero's EnableAPIGroupVersions choice with the source's
// preferred version first, so that a version is never changed when it
// need not be. When another version is chosen, it becomes that copy
// (its entry and bytes), and the change is reported once per group-resource.
func (a *applier) resolve(it *Item) (kube.Resource, string) {
	gvr := schema.GroupVersionResource{Group: it.Group, Version: it.Version, Resource: it.Resource}
	if r, ok := a.apis.Lookup(gvr); ok {
		return r, ""
	}
	served := a.apis.Versions(it.Group, it.Resource)
	if len(served) == 0 {
		return kube.Resource{}, fmt.Sprintf("the target does not serve %s", it.GroupResource)
	}
	for _, v := range served {
		for _, o := range it.Others {
			if o.Version != v {
				continue
			}
			r, _ := a.apis.Lookup(schema.GroupVersionResource{Group: it.Group, Version: v, Resource: it.Resource})
			it.Item, it.Others = o, nil
			if _, loaded := a.versionChanges.LoadOrStore(it.GroupResource, true); !loaded {
				a.results.Warnf("%s: restored at version %s: the target does not serve the source's preferred version %s (it serves %s)", it.GroupResource, v, it.SourceVersion, strings.Join(served, ", "))
			}
			return r, ""
		}
	}
	held := []string{it.Version}
	for _, o := range it.Others {
		held = append(held, o.Version)
	}
	return kube.Resource{}, fmt.Sprintf("no common version: the target serves %s only at %s, the backup holds %s", it.GroupResource, strings.Join(served, ", "), strings.Join(held, ", "))
}

// apply writes one item: create, and on AlreadyExists compare and follow
// the existing-resource policy.
func (a *applier) apply(ctx context.Context, it *Item) report.Result {
	res, why := a.resolve(it)
	if why != "" && a.opts.Spec.DryRun && a.plan.crdInPlan(it.Group, it.Resource) {
		return report.Result{Outcome: report.Created, Version: it.Version, Reason: "not validated", Message: "its CRD is created by this restore"}
	}
	if why != "" {
		a.unserved.Store(it.GroupResource, why)
		return report.Result{Outcome: report.Skipped, Reason: "version not served", Message: why}
	}
	u, changes, failed := a.desired(it, res)
	if failed != nil {
		return *failed
	}
	var status any
	if it.KeepStatus {
		status = u.Object["status"]
	}
	var client dynamic.ResourceInterface = a.cluster.Dynamic.Resource(res.GroupVersionResource)
	if a.opts.Spec.DryRun {
		if a.opts.OnDryRun != nil {
			a.opts.OnDryRun(res.GroupResource(), u)
		}
		return a.dryRun(ctx, it, res, u, changes)
	}
	if res.Namespaced {
		if err := a.ensureNamespace(ctx, u.GetNamespace()); err != nil {
			return report.Result{Outcome: report.Failed, Reason: "namespace", Message: err.Error(), Changes: changes}
		}
		client = a.cluster.Dynamic.Resource(res.GroupVersionResource).Namespace(u.GetNamespace())
	} else {
		u.SetNamespace("")
	}
	created, err := a.create(ctx, res, u)
	var clash error
	var cleared []string
	for try := 0; err != nil && it.GroupResource == "services" && isPortAllocated(err) && try < 3; try++ {
		// The API server refuses a taken node port before it finds the
		// name taken: without the taken ports, the target allocates new
		// ones, or the Service is there already and keeps its own.
		if clash == nil {
			clash = err
		}
		cleared = append(cleared, clearTakenNodePorts(u, err, try == 2)...)
		created, err = a.create(ctx, res, u)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		it.adopt = nil // only a claim this restore created is adopted (existing checks an existing one)
	}
	switch {
	case err == nil:
		if clash != nil {
			a.results.Warnf("service %s: %v; restored with new node ports for %s", key(u), clash, strings.Join(cleared, ", "))
			changes = append(changes, "node ports already allocated in the target: new ones allocated for "+strings.Join(cleared, ", "))
		}
		it.setTargetUID(created.Metadata.UID)
		if status != nil {
			u.Object["status"] = status
			u.SetResourceVersion(created.Metadata.ResourceVersion)
			u.SetUID(types.UID(created.Metadata.UID))
			if _, serr := client.UpdateStatus(ctx, u, metav1.UpdateOptions{}); serr != nil && !apierrors.IsNotFound(serr) {
				return report.Result{Outcome: report.Created, Version: res.Version, Message: "status not restored: " + serr.Error(), Changes: changes}
			}
		}
		return report.Result{Outcome: report.Created, Version: res.Version, Changes: changes}
	case apierrors.IsAlreadyExists(err), !apierrors.IsNotFound(err) && a.exists(ctx, client, u.GetName()):
		// Admission (a restored webhook whose backend is not up yet, say)
		// can refuse a CREATE before the API server sees the object is
		// already there: an existing object is compared, not failed.
		if clash != nil {
			changes = append(changes, "node ports already allocated in the target: the target's kept")
		}
		r := a.existing(ctx, it, client, u, res, changes)
		if clash != nil && r.Outcome == report.Updated {
			a.results.Warnf("service %s: %v; it exists in the target and was updated, keeping the target's node ports", key(u), clash)
		}
		return r
	default:
		if clash != nil {
			changes = append(changes, "node ports already allocated in the target: cleared")
		}
		return report.Result{Outcome: report.Failed, Version: res.Version, Reason: string(apierrors.ReasonForError(err)), Message: err.Error(), Changes: changes}
	}
}

// desired is the object the restore writes for it at res: the backup's
// copy decoded, at res's version, through the built-in transforms
// (pkg/transform) and then the user's resource modifiers, in the target
// namespace. changes lists what they changed. failed is non-nil when the
// object cannot be built (a corrupt object, a modifier that fails).
func (a *applier) desired(it *Item, res kube.Resource) (u *unstructured.Unstructured, changes []string, failed *report.Result) {
	// The object's bytes are read from the archive's spool for this call
	// only (docs/design.md#restore-flow).
	data, err := it.Read()
	if err != nil {
		return nil, nil, &report.Result{Outcome: report.Failed, Reason: "archive spool", Message: err.Error()}
	}
	u = &unstructured.Unstructured{}
	// UnmarshalJSON keeps integers as int64, as the API machinery expects.
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, nil, &report.Result{Outcome: report.Failed, Reason: "corrupt object", Message: err.Error()}
	}
	u.SetAPIVersion(schema.GroupVersion{Group: res.Group, Version: res.Version}.String())
	if it.early {
		changes = append(changes, a.deferOwners(it, u)...)
	}
	tctx := a.tctx
	tctx.KeepStatus = it.KeepStatus
	changes = append(changes, transform.Apply(&tctx, it.Group, u)...)
	// The user's rules see the object as the built-in transforms left it.
	notes, err := a.modifiers.Apply(u, it.GroupResource)
	if err != nil {
		return nil, changes, &report.Result{Outcome: report.Failed, Version: res.Version, Reason: "resource modifier", Message: err.Error(), Changes: changes}
	}
	changes = append(changes, notes...)
	if it.SourceVersion != "" && it.Version != it.SourceVersion {
		changes = append(changes, fmt.Sprintf("restored at API version %s: the target does not serve the source's preferred version %s", it.Version, it.SourceVersion))
	}
	if res.Namespaced && u.GetNamespace() == "" {
		u.SetNamespace(it.TargetNamespace)
	}
	return u, changes, nil
}

// createdMeta is what the restore reads of a CREATE response.
type createdMeta struct {
	Metadata struct {
		UID             string `json:"uid"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

// create POSTs u and decodes only the new object's UID and
// resourceVersion from the answer: one API call per created object, and
// no decode of the whole response (the API server's answer is the object
// just sent, plus defaults).
func (a *applier) create(ctx context.Context, res kube.Resource, u *unstructured.Unstructured) (*createdMeta, error) {
	body, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	p := "/api/" + res.Version
	if res.Group != "" {
		p = "/apis/" + res.Group + "/" + res.Version
	}
	if res.Namespaced {
		p += "/namespaces/" + u.GetNamespace()
	}
	p += "/" + res.GroupVersionResource.Resource
	result := a.cluster.REST.Post().AbsPath(p).SetHeader("Content-Type", "application/json").
		SetHeader("Accept", "application/json").Body(body).Do(ctx)
	// Error, not Raw, decodes the API server's Status into a StatusError.
	if err := result.Error(); err != nil {
		return nil, err
	}
	raw, _ := result.Raw()
	m := &createdMeta{}
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("decoding the CREATE response: %w", err)
	}
	return m, nil
}

// exists reports whether the target has the object called name.
func (a *applier) exists(ctx context.Context, client dynamic.ResourceInterface, name string) bool {
	_, err := client.Get(ctx, name, metav1.GetOptions{})
	return err == nil
}

// existing handles an object that is already in the target.
func (a *applier) existing(ctx context.Context, it *Item, client dynamic.ResourceInterface, desired *unstructured.Unstructured, res kube.Resource, changes []string) report.Result {
	adopt := it.adopt
	it.adopt = nil
	cur, err := client.Get(ctx, desired.GetName(), metav1.GetOptions{})
	if err != nil {
		return report.Result{Outcome: report.Failed, Version: res.Version, Reason: "exists", Message: "exists in the target but cannot be read: " + err.Error()}
	}
	it.setTargetUID(string(cur.GetUID()))
	if cur.GetLabels()[v1alpha1.LabelRestore] == transform.LabelValue(a.opts.Name) {
		// Made by an earlier run of this restore, killed before it adopted
		// its claims: adopted now. The target's own objects keep their owners.
		it.adopt = adopt
	}
	d := comparable(desired)
	same, where := contains(liveForCompare(cur).Object, d.Object, "")
	if same {
		return report.Result{Outcome: report.Unchanged, Version: res.Version, Reason: "exists, same"}
	}
	if it.GroupResource == "serviceaccounts" && it.Name == "default" {
		// The target's controller creates "default" as soon as its
		// namespace exists; the backup's settings (imagePullSecrets,
		// automountServiceAccountToken) are merged into it, as Velero does.
		merged := &unstructured.Unstructured{Object: overlay(cur.Object, d.Object).(map[string]any)}
		merged.SetResourceVersion(cur.GetResourceVersion())
		if _, err := client.Update(ctx, merged, metav1.UpdateOptions{}); err != nil {
			return report.Result{Outcome: report.Failed, Version: res.Version, Reason: string(apierrors.ReasonForError(err)), Message: "merging into the target's default ServiceAccount: " + err.Error()}
		}
		return report.Result{Outcome: report.Updated, Version: res.Version, Message: "merged into the target's default ServiceAccount (differed at " + where + ")", Changes: changes}
	}
	if a.opts.Spec.ExistingResourcePolicy != v1alpha1.PolicyUpdate {
		a.results.Warnf("%s %s: exists in the target and differs at %s; not changed (policy none)", it.GroupResource, key(desired), where)
		return report.Result{Outcome: report.Skipped, Version: res.Version, Reason: "exists, differs", Message: "first difference at " + where}
	}
	merged := replacement(cur, desired)
	merged.SetResourceVersion(cur.GetResourceVersion())
	if _, err := client.Update(ctx, merged, metav1.UpdateOptions{}); err != nil {
		return report.Result{Outcome: report.Failed, Version: res.Version, Reason: string(apierrors.ReasonForError(err)), Message: "update: " + err.Error(), Changes: changes}
	}
	return report.Result{Outcome: report.Updated, Version: res.Version, Message: "differed at " + where, Changes: changes}
}

// comparable returns desired without what a comparison with the live
// object must ignore: status and ferry's own labels, which differ between
// two restores of one backup.
func comparable(desired *unstructured.Unstructured) *unstructured.Unstructured {
	d := desired.DeepCopy()
	unstructured.RemoveNestedField(d.Object, "status")
	if l := d.GetLabels(); l != nil {
		for k := range l {
			if strings.HasPrefix(k, ignoredLabelPrefix) {
				delete(l, k)
			}
		}
		if len(l) == 0 {
			unstructured.RemoveNestedField(d.Object, "metadata", "labels")
		} else {
			d.SetLabels(l)
		}
	}
	return d
}

func key(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// isPortAllocated reports a node port clash. The API server answers 422
// for a taken nodePort and 500 for a taken healthCheckNodePort, both with
// "provided port is already allocated".
func isPortAllocated(err error) bool {
	return strings.Contains(err.Error(), "provided port is already allocated")
}

// portField is a node port field of a Service in an API server's cause.
var portField = regexp.MustCompile(`^spec\.ports\[(\d+)\]\.nodePort$`)

// clearTakenNodePorts clears the node ports that err, the API server's
// refusal, names as already allocated (its causes' fields), and returns
// them ("spec.ports[0].nodePort 30201"); the free ones a client pinned
// stay. When the causes name none it knows, or all is set, every node
// port is cleared.
func clearTakenNodePorts(u *unstructured.Unstructured, err error, all bool) []string {
	var causes []metav1.StatusCause
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil && !all {
		causes = st.Status().Details.Causes
	}
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
	var out []string
	for _, c := range causes {
		if !strings.Contains(c.Message, "already allocated") && !strings.Contains(c.Message, "provided port") {
			continue
		}
		if m := portField.FindStringSubmatch(c.Field); m != nil {
			i, _ := strconv.Atoi(m[1])
			if i >= len(ports) {
				continue
			}
			if p, ok := ports[i].(map[string]any); ok && p["nodePort"] != nil {
				out = append(out, fmt.Sprintf("%s %v", c.Field, p["nodePort"]))
				delete(p, "nodePort")
			}
		} else if c.Field == "spec.healthCheckNodePort" {
			if hc, ok, _ := unstructured.NestedInt64(u.Object, "spec", "healthCheckNodePort"); ok {
				out = append(out, fmt.Sprintf("%s %d", c.Field, hc))
				unstructured.RemoveNestedField(u.Object, "spec", "healthCheckNodePort")
			}
		}
	}
	if len(out) > 0 {
		_ = unstructured.SetNestedSlice(u.Object, ports, "spec", "ports")
		return out
	}
	for i, p := range ports {
		if m, ok := p.(map[string]any); ok && m["nodePort"] != nil {
			out = append(out, fmt.Sprintf("spec.ports[%d].nodePort %v", i, m["nodePort"]))
		}
	}
	if hc, ok, _ := unstructured.NestedInt64(u.Object, "spec", "healthCheckNodePort"); ok && hc != 0 {
		out = append(out, fmt.Sprintf("spec.healthCheckNodePort %d", hc))
	}
	transform.ClearNodePorts(u)
	return out
}

// ensureNamespace creates namespace ns if the target lacks it (one that
// the backup did not hold, or that the namespace filter left out).
func (a *applier) ensureNamespace(ctx context.Context, ns string) error {
	if _, ok := a.namespaces.Load(ns); ok {
		return nil
	}
	a.nsMu.Lock()
	defer a.nsMu.Unlock()
	if _, ok := a.namespaces.Load(ns); ok {
		return nil
	}
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	_, err := a.cluster.Dynamic.Resource(nsGVR).Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns,
			"labels": map[string]any{v1alpha1.LabelBackup: transform.LabelValue(a.tctx.BackupName), v1alpha1.LabelRestore: transform.LabelValue(a.tctx.RestoreName)}}}}
		_, err = a.cluster.Dynamic.Resource(nsGVR).Create(ctx, obj, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			a.results.Warnf("namespace %s was not in the restore and was created", ns)
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	a.namespaces.Store(ns, true)
	return nil
}

// waitForCRDs waits until every restored CRD is Established and its
// versions are served, then refreshes discovery for the tiers after it.
// A CRD that does not get there within CRDTimeout (a names conflict, say)
// is a warning: its custom resources then fail or are skipped one by one,
// and the rest of the restore goes on.
func (a *applier) waitForCRDs(ctx context.Context, crds []*Item) {
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	var ready []*Item
	for _, it := range crds {
		var why string
		// Each CRD gets the whole timeout (started once it may be waited on).
		wctx, cancel := context.WithTimeout(ctx, a.opts.CRDTimeout)
		err := wait.PollUntilContextCancel(wctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			u, err := a.cluster.Dynamic.Resource(gvr).Get(ctx, it.TargetName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil // not restored (failed or skipped): nothing to wait for
			}
			if err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					ready = append(ready, it)
					return true, nil
				}
				if m["status"] == "False" && m["message"] != nil {
					why = fmt.Sprintf(" (%v: %v)", m["reason"], m["message"])
				}
			}
			return false, nil
		})
		cancel()
		if err != nil && ctx.Err() == nil {
			a.results.Warnf("CRD %s is not Established after %s%s; its custom resources will fail or be skipped", it.TargetName, a.opts.CRDTimeout, why)
		}
	}
	// Discovery lags Established by a moment: poll until the CRDs' groups show.
	type served struct{ group, plural string }
	var want []served
	for _, it := range ready {
		var spec struct {
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Plural string `json:"plural"`
				} `json:"names"`
			} `json:"spec"`
		}
		if data, err := it.Read(); err == nil && json.Unmarshal(data, &spec) == nil && spec.Spec.Group != "" {
			want = append(want, served{spec.Spec.Group, spec.Spec.Names.Plural})
		}
	}
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	_ = wait.PollUntilContextCancel(dctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		apis, err := kube.Discover(a.cluster.Discovery)
		if err != nil {
			return false, nil
		}
		a.apis = apis
		for _, w := range want {
			if len(apis.Versions(w.group, w.plural)) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
}
