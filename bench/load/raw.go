package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/kubeferry/ferry/bench/internal/benchutil"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ---------------------------------------------------------------- raw references

// The raw references are plain client-go doing the API work of a backup
// and a restore of the load, each in a child process of its own (this
// program in a hidden mode, started through the launcher like ferry), with
// client-side rate limiting off.
const (
	rawListMode   = "raw-list"
	rawCreateMode = "raw-create"
)

// createTiers are the seeded kinds in ferry's restore order after the CRD
// and the Namespaces (pkg/restore/order.go: tierSecret, tierConfigMap,
// tierRest for custom resources, tierWorkload, tierService), with ferry's
// tier names.
var createTiers = []struct{ name, resource string }{
	{"Secrets", "secrets"},
	{"ConfigMaps", "configmaps"},
	{"other resources", "widgets"},
	{"workloads", "deployments"},
	{"Services", "services"},
}

// RawResult is what a raw reference child prints (JSON on stdout).
type RawResult struct {
	// Workers is the concurrency: goroutines creating inside each tier
	// (raw CREATE), or LIST streams (raw LIST); PageSize is the LIST limit.
	Workers  int `json:"workers"`
	PageSize int `json:"pageSize,omitempty"`
	// DiscoverySeconds is the raw LIST's API discovery, part of its time.
	DiscoverySeconds float64 `json:"discoverySeconds,omitempty"`
	// Resources counts the resource versions listed; OtherVersions of them
	// are a resource at a version other than its preferred one, which
	// ferry's backup lists too.
	Resources     int `json:"resources,omitempty"`
	OtherVersions int `json:"otherVersions,omitempty"`
	// Items counts the items listed at preferred versions (what ferry
	// counts as backed up), per group-resource in Counts; OtherItems the
	// items at other versions.
	Items      int            `json:"items,omitempty"`
	OtherItems int            `json:"otherItems,omitempty"`
	Counts     map[string]int `json:"counts,omitempty"`
	Requests   int            `json:"requests,omitempty"`
	Bytes      int64          `json:"bytes,omitempty"`
	// Expired counts LISTs restarted whole after their continue token expired.
	Expired int `json:"expired,omitempty"`
	// Tiers is the raw CREATE's tiers in order, Created their objects.
	Tiers   []Tier `json:"tiers,omitempty"`
	Created int    `json:"created,omitempty"`
	// ClusterIPServices, HeadlessServices and RangeFullFallbacks are as
	// in Seed; Retries counts creates retried after a transient error.
	ClusterIPServices  int `json:"clusterIPServices,omitempty"`
	HeadlessServices   int `json:"headlessServices,omitempty"`
	RangeFullFallbacks int `json:"rangeFullFallbacks,omitempty"`
	Retries            int `json:"retries,omitempty"`
	// InnerSeconds is the child's own time for the API work, from after
	// loading the kubeconfig to the end.
	InnerSeconds float64 `json:"innerSeconds"`
}

// Tier is one tier of the raw CREATE: its objects, created concurrently,
// and its time; the next tier starts when it is done.
type Tier struct {
	Name    string  `json:"name"`
	Objects int     `json:"objects"`
	Seconds float64 `json:"seconds"`
}

// runRawList is raw-list mode: -kubeconfig, -context, -workers, -page.
func runRawList(args []string) int {
	fs := flag.NewFlagSet(rawListMode, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "")
	kctx := fs.String("context", "", "")
	workers := fs.Int("workers", ferryListWorkers, "")
	page := fs.Int("page", ferryPageSize, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	return rawMain(*kubeconfig, *kctx, func(ctx context.Context, cfg *rest.Config) (*RawResult, error) {
		return rawList(ctx, cfg, *workers, *page)
	})
}

// runRawCreate is raw-create mode: -kubeconfig, -context, -namespaces,
// -objects, -clusterip-per-ns, -workers.
func runRawCreate(args []string) int {
	fs := flag.NewFlagSet(rawCreateMode, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "")
	kctx := fs.String("context", "", "")
	namespaces := fs.Int("namespaces", 0, "")
	objects := fs.Int("objects", 0, "")
	clusterIPPerNS := fs.Int("clusterip-per-ns", 1, "")
	workers := fs.Int("workers", ferryRestoreWorkers, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	return rawMain(*kubeconfig, *kctx, func(ctx context.Context, cfg *rest.Config) (*RawResult, error) {
		s, err := newSeeder(cfg, *namespaces, *objects, *clusterIPPerNS)
		if err != nil {
			return nil, err
		}
		return rawCreate(ctx, s, *workers)
	})
}

// rawMain loads the kubeconfig context (client-side rate limiting off),
// runs fn and prints its result.
func rawMain(kubeconfig, kctx string, fn func(context.Context, *rest.Config) (*RawResult, error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: kctx}).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	cfg.QPS = -1
	cfg.WarningHandler = rest.NoWarnings{}
	start := time.Now()
	r, err := fn(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	r.InnerSeconds = time.Since(start).Seconds()
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	return 0
}

// rawCreate creates the CRD (and waits until it is Established), the
// namespaces, and the seeded objects, one tier after the other in ferry's
// restore order (createTiers), each tier on workers goroutines.
func rawCreate(ctx context.Context, s *seeder, workers int) (*RawResult, error) {
	r := &RawResult{Workers: workers}
	tier := func(name string, n int, fn func() error) error {
		start := time.Now()
		if err := fn(); err != nil {
			return fmt.Errorf("tier %s: %w", name, err)
		}
		r.Tiers = append(r.Tiers, Tier{Name: name, Objects: n, Seconds: time.Since(start).Seconds()})
		r.Created += n
		return nil
	}
	if err := tier("CRDs", 1, func() error { return createCRD(ctx, s.dyn) }); err != nil {
		return nil, err
	}
	if err := tier("Namespaces", len(s.nss), func() error { return parallel(ctx, workers, len(s.nss), s.createNamespace) }); err != nil {
		return nil, err
	}
	for _, t := range createTiers {
		n := s.counts[t.resource]
		err := tier(t.name, n, func() error {
			return parallel(ctx, workers, n, func(ctx context.Context, i int) error { return s.createObject(ctx, t.resource, i) })
		})
		if err != nil {
			return nil, err
		}
	}
	r.ClusterIPServices, r.HeadlessServices = int(s.clusterIP.Load()), int(s.headless.Load())
	r.RangeFullFallbacks, r.Retries = int(s.rangeFull.Load()), int(s.retries.Load())
	return r, nil
}

// listTask is one resource version to list, cluster-wide.
type listTask struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	// preferred is false for a resource at a version other than its
	// preferred one.
	preferred bool
}

// rawList discovers the cluster's resources, as ferry's backup does (one
// ServerGroupsAndResources), and lists what a whole-cluster backup lists
// (listTasks), on workers concurrent streams in pages of page items:
// the namespaced resources, then the cluster-scoped ones.
func rawList(ctx context.Context, cfg *rest.Config, workers, page int) (*RawResult, error) {
	rcfg := rest.CopyConfig(cfg)
	rcfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(rcfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	namespaced, cluster, err := listTasks(dc)
	if err != nil {
		return nil, err
	}
	r := &RawResult{Workers: workers, PageSize: page, DiscoverySeconds: time.Since(start).Seconds(), Counts: map[string]int{}}
	var mu sync.Mutex
	for _, tasks := range [][]listTask{namespaced, cluster} {
		err := parallel(ctx, workers, len(tasks), func(ctx context.Context, i int) error {
			t := tasks[i]
			st, err := listOne(ctx, rc, t, page)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			r.Resources++
			r.Requests += st.requests
			r.Bytes += st.bytes
			r.Expired += st.expired
			if t.preferred {
				r.Items += st.items
				r.Counts[t.gvr.GroupResource().String()] += st.items
			} else {
				r.OtherVersions++
				r.OtherItems += st.items
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// listTasks returns what ferry's backup of a whole cluster lists
// (pkg/backup, selectResources): every resource that supports list and get
// but componentstatuses, at its preferred version (the first its group
// serves it at, in discovery order) and at each other served version,
// sorted by group-resource; namespaced and cluster-scoped apart.
func listTasks(dc discovery.DiscoveryInterface) (namespaced, cluster []listTask, err error) {
	groups, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		return nil, nil, fmt.Errorf("discovery: %w", err)
	}
	served := map[schema.GroupVersionResource]bool{} // listable and gettable
	scope := map[schema.GroupVersionResource]bool{}  // namespaced
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "get") ||
				(gv.Group == "" && r.Name == "componentstatuses") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			served[gvr], scope[gvr] = true, r.Namespaced
		}
	}
	byGR := map[schema.GroupResource][]schema.GroupVersionResource{}
	for _, g := range groups {
		for _, v := range g.Versions {
			for gvr := range served {
				if gvr.Group == g.Name && gvr.Version == v.Version {
					byGR[gvr.GroupResource()] = append(byGR[gvr.GroupResource()], gvr)
				}
			}
		}
	}
	grs := make([]schema.GroupResource, 0, len(byGR))
	for gr := range byGR {
		grs = append(grs, gr)
	}
	sort.Slice(grs, func(i, j int) bool { return grs[i].String() < grs[j].String() })
	for _, gr := range grs {
		for i, gvr := range byGR[gr] {
			t := listTask{gvr: gvr, namespaced: scope[gvr], preferred: i == 0}
			if t.namespaced {
				namespaced = append(namespaced, t)
			} else {
				cluster = append(cluster, t)
			}
		}
	}
	return namespaced, cluster, nil
}

type listStats struct {
	items, requests, expired int
	bytes                    int64
}

// listOne pages through t's LIST, cluster-wide (limit page, continue
// tokens, JSON as ferry asks for), counting the items of each page. When
// a continue token expires it lists again whole, as client-go's pager does.
func listOne(ctx context.Context, rc rest.Interface, t listTask, page int) (listStats, error) {
	var st listStats
	path := "/api/" + t.gvr.Version
	if t.gvr.Group != "" {
		path = "/apis/" + t.gvr.Group + "/" + t.gvr.Version
	}
	path += "/" + t.gvr.Resource
	cont, limit := "", page
	for {
		req := rc.Get().AbsPath(path).SetHeader("Accept", "application/json")
		if limit > 0 {
			req = req.Param("limit", strconv.Itoa(limit))
		}
		if cont != "" {
			req = req.Param("continue", cont)
		}
		result := req.Do(ctx)
		// Error, not Raw, decodes the API server's Status into a StatusError.
		err := result.Error()
		if err != nil && apierrors.IsResourceExpired(err) && cont != "" {
			st.expired++
			st.items, cont, limit = 0, "", 0
			continue
		}
		if err != nil {
			return st, fmt.Errorf("list %s: %w", t.gvr, err)
		}
		body, _ := result.Raw()
		st.requests++
		st.bytes += int64(len(body))
		n, next, err := splitList(body)
		if err != nil {
			return st, fmt.Errorf("list %s: %w", t.gvr, err)
		}
		st.items += n
		if next == "" {
			return st, nil
		}
		cont = next
	}
}

// splitList reads a LIST response once (a streaming JSON tokenizer) and
// returns how many items it holds and its continue token.
func splitList(body []byte) (items int, cont string, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return 0, "", errors.New("the LIST response is not a JSON object")
	}
	for dec.PeekKind() != '}' {
		key, err := dec.ReadToken()
		if err != nil {
			return 0, "", err
		}
		switch key.String() {
		case "metadata":
			v, err := dec.ReadValue()
			if err != nil {
				return 0, "", err
			}
			var m struct {
				Continue string `json:"continue"`
			}
			if err := json.Unmarshal(v, &m); err != nil {
				return 0, "", err
			}
			cont = m.Continue
		case "items":
			if dec.PeekKind() != '[' {
				if err := dec.SkipValue(); err != nil { // "items": null
					return 0, "", err
				}
				continue
			}
			if _, err := dec.ReadToken(); err != nil {
				return 0, "", err
			}
			for dec.PeekKind() != ']' {
				if _, err := dec.ReadValue(); err != nil {
					return 0, "", err
				}
				items++
			}
			if _, err := dec.ReadToken(); err != nil {
				return 0, "", err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return 0, "", err
			}
		}
	}
	return items, cont, nil
}

// ---------------------------------------------------------------- running the references

// Reference is one timed raw reference child process.
type Reference struct {
	Operation string   `json:"operation"`
	Context   string   `json:"context"`
	Args      []string `json:"args"`
	// Objects is the seeded objects (Seed.Total), the same numerator as
	// the ferry runs'; PerSecond is Objects divided by Seconds, the
	// child's wall-clock time.
	Objects    int        `json:"objects"`
	Seconds    float64    `json:"seconds"`
	PerSecond  float64    `json:"perSecond"`
	MaxRSSMiB  float64    `json:"maxRSSMiB"`
	CPUSeconds float64    `json:"cpuSeconds"`
	ExitCode   int        `json:"exitCode"`
	Raw        *RawResult `json:"raw,omitempty"`
	// CountDiffs (raw LIST) names the group-resources whose item count
	// differs from ferry's backup of the same source (objects that come
	// and go, events say, may): informational.
	CountDiffs []string `json:"countDiffs,omitempty"`
	// Verify and Content (raw CREATE) compare the cluster created with the
	// source, as after a ferry restore.
	Verify     []Check       `json:"verify,omitempty"`
	Content    *ContentCheck `json:"content,omitempty"`
	StderrTail string        `json:"stderrTail,omitempty"`
	Error      string        `json:"error,omitempty"`
}

// reference runs one raw reference child (this program in mode) against
// kctx and decodes its result.
func (e *ferryRuns) reference(ctx context.Context, op, mode, kctx string, objects int, args ...string) *Reference {
	args = append([]string{mode, "-kubeconfig", e.kubeconfig, "-context", kctx}, args...)
	r := &Reference{Operation: op, Context: kctx, Args: args, Objects: objects}
	self, err := os.Executable()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	out, stderr, u, err := launch(ctx, e.launcher, nil, self, args...)
	r.Seconds, r.MaxRSSMiB, r.CPUSeconds, r.ExitCode = u.Seconds, u.MaxRSSMiB, u.CPUSeconds, u.Code
	if r.Seconds > 0 {
		r.PerSecond = float64(objects) / r.Seconds
	}
	r.StderrTail = benchutil.Tail(string(stderr), 2000)
	if err != nil {
		r.Error = fmt.Sprintf("%v; stderr: %s", err, r.StderrTail)
		return r
	}
	r.Raw = &RawResult{}
	if err := json.Unmarshal(out, r.Raw); err != nil {
		r.Raw = nil
		r.Error = fmt.Sprintf("decoding the result: %v; stdout: %s", err, benchutil.Tail(string(out), 500))
	}
	return r
}

// rawList runs the raw LIST of the source and compares its counts with
// those of ferry's backup b.
func (e *ferryRuns) rawList(ctx context.Context, objects int, b *Run) *Reference {
	r := e.reference(ctx, "raw LIST", rawListMode, srcContext, objects,
		"-workers", strconv.Itoa(e.o.listWorkers), "-page", strconv.Itoa(e.o.page))
	if r.Raw == nil || b.Backup == nil {
		return r
	}
	ferry := b.Backup.Status.ResourceCounts
	keys := map[string]bool{}
	for k := range ferry {
		keys[k] = true
	}
	for k := range r.Raw.Counts {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		if ferry[k] != r.Raw.Counts[k] {
			r.CountDiffs = append(r.CountDiffs, fmt.Sprintf("%s: ferry %d, raw %d", k, ferry[k], r.Raw.Counts[k]))
		}
	}
	return r
}

// rawCreate runs the raw CREATE into the empty raw cluster and compares
// it with the source (want: the source's counts) as a restore's target.
func (e *ferryRuns) rawCreate(ctx context.Context, s Seed, want map[string]int) *Reference {
	r := e.reference(ctx, "raw CREATE", rawCreateMode, rawContext, s.Total,
		"-namespaces", strconv.Itoa(s.Namespaces), "-objects", strconv.Itoa(s.Total),
		"-clusterip-per-ns", strconv.Itoa(e.o.clusterIPPerNS), "-workers", strconv.Itoa(e.o.createWorkers))
	if r.Raw == nil {
		return r
	}
	var err error
	r.Verify, r.Content, err = verifyTarget(ctx, e.raw, want, e.sample)
	if err != nil {
		r.Error = err.Error()
	}
	return r
}
