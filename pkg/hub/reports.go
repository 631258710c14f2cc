package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/hub/controller"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/store"
)

// reportsPath is where the hub serves verification reports:
// /reports/<namespace>/<migration>, HTML, or JSON with ?format=json.
const reportsPath = "/reports/"

// reports serves the verification report of a Migration from its backup
// storage location. It reads the Migration through the hub's loopback
// client: the request itself was authorized as a GET of its path.
type reports struct {
	config *rest.Config
	once   sync.Once
	client client.Client
	err    error
}

func (h *reports) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, reportsPath), "/")
	if r.Method != http.MethodGet || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		http.Error(w, "want GET "+reportsPath+"<namespace>/<migration>", http.StatusNotFound)
		return
	}
	h.once.Do(func() { h.client, h.err = client.New(h.config, client.Options{Scheme: controller.Scheme()}) })
	if h.err != nil {
		http.Error(w, h.err.Error(), http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	asJSON := r.URL.Query().Get("format") == "json"
	body, code, err := h.report(ctx, types.NamespacedName{Namespace: parts[0], Name: parts[1]}, asJSON)
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if asJSON {
		w.Header().Set("Content-Type", "application/json")
	}
	_, _ = w.Write(body)
}

// report reads Migration key's report, or says why there is none, with
// the HTTP status.
func (h *reports) report(ctx context.Context, key types.NamespacedName, asJSON bool) ([]byte, int, error) {
	var m v1beta1.Migration
	if err := h.client.Get(ctx, key, &m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, http.StatusNotFound, fmt.Errorf("migration %s not found", key)
		}
		return nil, http.StatusBadGateway, err
	}
	if m.Status.ReportLocation == "" {
		return nil, http.StatusNotFound, fmt.Errorf("migration %s has no verification report (phase %q)", key, m.Status.Phase)
	}
	loc, _, err := controller.OpenLocation(ctx, h.client, &m)
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	defer loc.Close()
	// A staged Migration's report is its cutover's, with the cutover's
	// timeline.
	name := m.Name
	if c := m.Status.Cutover; c != nil && c.Name != "" {
		name = c.Name
	}
	body, err := migration.OpenReport(ctx, loc, name, !asJSON)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, http.StatusNotFound, fmt.Errorf("migration %s: %w in %s", key, err, loc.URL())
	case err != nil:
		return nil, http.StatusBadGateway, err
	}
	return body, http.StatusOK, nil
}
