package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/report"
)

// task is one paginated LIST: a resource in one namespace ("" for all
// namespaces or cluster scope).
type task struct {
	res       kube.Resource
	namespace string
	// matchNS filters items by the namespace filter client-side.
	matchNS bool
	// selector is the server-side label selector ("" for none).
	selector string
	// other is true for a resource at a version other than its preferred
	// one: its items go under resources/<gr>/<version>/ and are not counted
	// as objects (they are copies of objects listed at the preferred version).
	other bool
	// pick, if set, decides whether an item is written (and records why):
	// the LISTs of related cluster-scoped objects (related.go).
	pick func(data []byte) (bool, error)
}

func (r *run) namespacedTasks(sel selection) []task {
	var tasks []task
	literal, isLiteral := r.nsf.Literal()
	for _, res := range sel.namespaced {
		if isLiteral {
			for _, ns := range literal {
				if r.nsf.Match(ns) {
					tasks = append(tasks, task{res: res, namespace: ns, selector: r.selector, other: sel.other[res.GroupVersionResource]})
				}
			}
			continue
		}
		tasks = append(tasks, task{res: res, matchNS: true, selector: r.selector, other: sel.other[res.GroupVersionResource]})
	}
	return tasks
}

func (r *run) clusterTasks(sel selection) []task {
	var tasks []task
	for _, res := range sel.cluster {
		isNS := res.Group == "" && res.GroupVersionResource.Resource == "namespaces"
		switch {
		case isNS:
			// Namespace objects follow the namespace filter, never the
			// label selector: a restore needs the scopes of what it restores.
			tasks = append(tasks, task{res: res, matchNS: true})
		case sel.clusterAll:
			tasks = append(tasks, task{res: res, selector: r.selector, other: sel.other[res.GroupVersionResource]})
		}
	}
	return tasks
}

// listAll runs tasks on opts.Workers goroutines. A failed LIST is recorded
// as an error naming the resource, and the backup goes on; an archive
// write error stops everything.
func (r *run) listAll(ctx context.Context, tasks []task) error {
	ch := make(chan task)
	var wg sync.WaitGroup
	var once sync.Once
	var fatal error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := 0; i < r.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				if err := r.list(ctx, t); err != nil {
					once.Do(func() { fatal = err; cancel() })
				}
			}
		}()
	}
	for _, t := range tasks {
		select {
		case ch <- t:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
	if fatal != nil {
		return fatal
	}
	return r.ctx.Err()
}

// listPath returns the REST path of t's collection.
func listPath(t task) string {
	p := "/api/" + t.res.Version
	if t.res.Group != "" {
		p = path.Join("/apis", t.res.Group, t.res.Version)
	}
	if t.res.Namespaced && t.namespace != "" {
		p = path.Join(p, "namespaces", t.namespace)
	}
	return path.Join(p, t.res.GroupVersionResource.Resource)
}

// list pages through one task (limit opts.PageSize, continue tokens). The
// next page is fetched while the current one is written. When a continue
// token expires (410 Gone) it falls back to one full LIST, as client-go's
// pager does, skipping the items already written.
func (r *run) list(ctx context.Context, t task) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan page, 1)
	var fetchErr error
	go func() {
		defer close(pages)
		fetchErr = r.fetchPages(ctx, t, pages)
	}()
	prefix := []byte(`{"apiVersion":"` + t.res.GroupVersion().String() + `","kind":"` + t.res.Kind + `",`)
	seen := &seenSet{m: map[string]bool{}}
	// Pages are decoded and hashed by two consumers while the next page is
	// fetched; archive writes are serialized inside the archive writer.
	var wg sync.WaitGroup
	var once sync.Once
	var werr error
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range pages {
				for _, raw := range p.Items {
					if err := r.writeRaw(t, prefix, raw, seen); err != nil {
						once.Do(func() { werr = err; cancel() })
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if werr != nil {
		return werr
	}
	if fetchErr != nil {
		return r.listFailed(ctx, t, fetchErr)
	}
	return nil
}

// seenSet remembers the items of one LIST already written, for the
// full-LIST fallback after an expired continue token.
type seenSet struct {
	mu sync.Mutex
	m  map[string]bool
}

// add reports whether key is new, recording it.
func (s *seenSet) add(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[key] {
		return false
	}
	s.m[key] = true
	return true
}

// fetchPages sends every page of t's LIST to out.
func (r *run) fetchPages(ctx context.Context, t task, out chan<- page) error {
	rc := r.cluster.REST
	cont, limit := "", r.opts.PageSize
	for {
		req := rc.Get().AbsPath(listPath(t)).SetHeader("Accept", "application/json")
		if limit > 0 {
			req = req.Param("limit", strconv.FormatInt(limit, 10))
		}
		if cont != "" {
			req = req.Param("continue", cont)
		}
		if t.selector != "" {
			req = req.Param("labelSelector", t.selector)
		}
		result := req.Do(ctx)
		// Error, not Raw, decodes the API server's Status into a StatusError.
		err := result.Error()
		body, _ := result.Raw()
		if err != nil && apierrors.IsResourceExpired(err) && cont != "" {
			cont, limit = "", 0
			continue
		}
		if err != nil {
			return err
		}
		p, err := parsePage(body)
		if err != nil {
			return fmt.Errorf("decoding the LIST response: %w", err)
		}
		select {
		case out <- p:
		case <-ctx.Done():
			return ctx.Err()
		}
		if p.Continue == "" {
			return nil
		}
		cont = p.Continue
	}
}

// writeRaw adds apiVersion and kind (which LIST items lack) to one raw
// item and writes it.
func (r *run) writeRaw(t task, prefix []byte, raw []byte, seen *seenSet) error {
	m, err := decodeMeta(raw)
	if err != nil {
		return fmt.Errorf("decoding %s item: %w", t.res.GroupResource(), err)
	}
	ns, name := m.Namespace, m.Name
	if t.matchNS {
		scope := ns
		if !t.res.Namespaced {
			scope = name // the Namespace objects themselves
		}
		if !r.nsf.Match(scope) {
			return nil
		}
	}
	if !seen.add(ns + "/" + name) {
		return nil
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '{' {
		return fmt.Errorf("%s %s/%s: item is not a JSON object", t.res.GroupResource(), ns, name)
	}
	data := raw
	if !m.TypeMeta {
		data = make([]byte, 0, len(prefix)+len(raw))
		data = append(append(data, prefix...), raw[1:]...)
	}
	if t.other {
		return r.writeOtherVersion(t.res, ns, name, data)
	}
	if t.pick != nil {
		if ok, err := t.pick(data); err != nil || !ok {
			return err
		}
	}
	r.total.Add(1)
	r.refs.included(t.res, ns, name)
	if r.images != nil && isWorkload(t.res.Group, t.res.Kind) {
		var obj map[string]any
		if err := json.Unmarshal(data, &obj); err == nil {
			r.images.Add(obj)
		}
	}
	if r.refs.interesting(t.res) {
		if err := r.refs.observeRaw(t.res, data); err != nil {
			return err
		}
	}
	return r.writeItem(t.res, ns, name, data)
}

// listFailed records a LIST that failed; the backup goes on without it.
func (r *run) listFailed(ctx context.Context, t task, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	where := "all namespaces"
	if t.namespace != "" {
		where = "namespace " + t.namespace
	} else if !t.res.Namespaced {
		where = "cluster scope"
	}
	if t.other {
		// The objects are in the backup at the preferred version; only
		// this extra copy is missing (a conversion webhook that is down, say).
		r.results.Warnf("%s at version %s in %s not backed up (the objects are, at the preferred version): %v", t.res.GroupResource(), t.res.Version, where, err)
		return nil
	}
	r.results.Add(report.Result{Resource: t.res.GroupResource(), Version: t.res.Version, Namespace: t.namespace, Name: "*", Outcome: report.Failed, Message: fmt.Sprintf("listing %s in %s: %v", t.res.GroupResource(), where, err)})
	return nil
}

// isWorkload reports whether objects of group and kind carry a pod spec.
func isWorkload(group, kind string) bool {
	_, ok := kube.PodSpecPathOf(group, kind)
	return ok
}
