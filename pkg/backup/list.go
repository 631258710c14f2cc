package backup

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

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
}

func (r *run) namespacedTasks(sel selection) []task {
	var tasks []task
	literal, isLiteral := r.nsf.Literal()
	for _, res := range sel.namespaced {
		if isLiteral {
			for _, ns := range literal {
				if r.nsf.Match(ns) {
					tasks = append(tasks, task{res: res, namespace: ns, selector: r.selector})
				}
			}
			continue
		}
		tasks = append(tasks, task{res: res, matchNS: true, selector: r.selector})
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
			tasks = append(tasks, task{res: res, selector: r.selector})
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

// writeError marks errors that must stop the backup (archive writes).
type writeError struct{ error }

// list pages through one task with client-go's pager, which falls back
// to a full LIST when a continue token expires.
func (r *run) list(ctx context.Context, t task) error {
	client := r.cluster.Dynamic.Resource(t.res.GroupVersionResource)
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		if t.res.Namespaced && t.namespace != "" {
			return client.Namespace(t.namespace).List(ctx, opts)
		}
		return client.List(ctx, opts)
	})
	p.PageSize = r.opts.PageSize
	p.PageBufferSize = 2
	err := p.EachListItem(ctx, metav1.ListOptions{LabelSelector: t.selector}, func(o runtime.Object) error {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return nil
		}
		ns := u.GetNamespace()
		if t.matchNS {
			name := ns
			if !t.res.Namespaced {
				name = u.GetName() // the Namespace objects themselves
			}
			if !r.nsf.Match(name) {
				return nil
			}
		}
		r.total.Add(1)
		r.refs.observe(t.res, u)
		if err := r.writeItem(t.res, u); err != nil {
			return writeError{err}
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if we, ok := err.(writeError); ok {
		return we.error
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	where := "all namespaces"
	if t.namespace != "" {
		where = "namespace " + t.namespace
	} else if !t.res.Namespaced {
		where = "cluster scope"
	}
	r.results.Add(report.Result{Resource: t.res.GroupResource(), Version: t.res.Version, Namespace: t.namespace, Name: "*", Outcome: report.Failed, Message: fmt.Sprintf("listing %s in %s: %v", t.res.GroupResource(), where, err)})
	return nil
}
