package migration

import (
	"context"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
)

// OpenReport opens the verification report of Migration m from its
// backup storage location, HTML or JSON; the caller closes it.
type OpenReport func(ctx context.Context, m *ferry.Migration, html bool) (io.ReadCloser, error)

// ReportREST is the subresource migrations/NAME/report: a GET is
// authorized as one of the Migration's subresource (get
// migrations/report in its namespace), reads the Migration through the
// Migrations storage, and streams its report from the location: HTML
// when the request accepts text/html first, JSON otherwise.
type ReportREST struct {
	migrations rest.Getter
	open       OpenReport
}

var (
	_ rest.Getter          = &ReportREST{}
	_ rest.StorageMetadata = &ReportREST{}
)

// NewReportREST serves the reports of the Migrations of migrations.
func NewReportREST(migrations rest.Getter, open OpenReport) *ReportREST {
	return &ReportREST{migrations: migrations, open: open}
}

// New is the object the subresource belongs to.
func (r *ReportREST) New() runtime.Object { return &ferry.Migration{} }

// Destroy has nothing to release.
func (r *ReportREST) Destroy() {}

// ProducesMIMETypes are the report's formats.
func (r *ReportREST) ProducesMIMETypes(string) []string {
	return []string{"application/json", "text/html"}
}

// ProducesObject: the report is a document, not an API object.
func (r *ReportREST) ProducesObject(string) any { return "" }

// Get returns the report of Migration name as a stream.
func (r *ReportREST) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.migrations.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return &reportStream{m: obj.(*ferry.Migration), open: r.open}, nil
}

// reportStream is a rest.ResourceStreamer of one Migration's report.
type reportStream struct {
	metav1.TypeMeta
	m    *ferry.Migration
	open OpenReport
}

func (s *reportStream) DeepCopyObject() runtime.Object {
	c := *s
	c.m = s.m.DeepCopy()
	return &c
}

// InputStream opens the report: HTML when accept names text/html before
// any JSON type, JSON otherwise.
func (s *reportStream) InputStream(ctx context.Context, _, accept string) (io.ReadCloser, bool, string, error) {
	html := wantsHTML(accept)
	r, err := s.open(ctx, s.m, html)
	if err != nil {
		return nil, false, "", err
	}
	if html {
		return r, false, "text/html; charset=utf-8", nil
	}
	return r, false, "application/json", nil
}

// wantsHTML says whether an Accept header asks for text/html before JSON.
func wantsHTML(accept string) bool {
	h, j := strings.Index(accept, "text/html"), strings.Index(accept, "json")
	return h >= 0 && (j < 0 || h < j)
}
