package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
	"github.com/kubeferry/ferry/pkg/hub/controller"
	"github.com/kubeferry/ferry/pkg/migration"
	"github.com/kubeferry/ferry/pkg/store"
)

// reportOpener opens Migrations' verification reports for the
// subresource migrations/NAME/report (registry/migration.ReportREST),
// whose request the API server authorized as a get of it. The location is
// opened as the controllers open it (controller.OpenLocation), with the
// Migration's Credential read through the hub's own client: nobody else
// reads credentials.
type reportOpener struct {
	config *rest.Config
	once   sync.Once
	client client.Client
	err    error
}

func (h *reportOpener) open(ctx context.Context, in *ferry.Migration, html bool) (io.ReadCloser, error) {
	h.once.Do(func() { h.client, h.err = client.New(h.config, client.Options{Scheme: controller.Scheme()}) })
	if h.err != nil {
		return nil, h.err
	}
	var m v1beta1.Migration
	if err := Scheme.Convert(in, &m, nil); err != nil {
		return nil, err
	}
	key := m.Namespace + "/" + m.Name
	if m.Status.ReportLocation == "" {
		return nil, statusError(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("migration %s has no verification report (phase %q)", key, m.Status.Phase))
	}
	loc, _, err := controller.OpenLocation(ctx, h.client, &m)
	if err != nil {
		return nil, statusError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, fmt.Sprintf("migration %s: its backup storage location: %v", key, err))
	}
	// A staged Migration's report is its cutover's, with the cutover's
	// timeline.
	name := m.Name
	if c := m.Status.Cutover; c != nil && c.Name != "" {
		name = c.Name
	}
	r, err := migration.ReportReader(ctx, loc, name, html)
	switch {
	case errors.Is(err, store.ErrNotFound):
		loc.Close()
		return nil, statusError(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("migration %s: %v in %s", key, err, loc.URL()))
	case err != nil:
		loc.Close()
		return nil, statusError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, fmt.Sprintf("migration %s: %v", key, err))
	}
	return &reportReader{ReadCloser: r, loc: loc}, nil
}

// reportReader closes the location with the report.
type reportReader struct {
	io.ReadCloser
	loc *store.Location
}

func (r *reportReader) Close() error {
	err := r.ReadCloser.Close()
	r.loc.Close()
	return err
}

func statusError(code int32, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}
