package running

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/report"
)

// ImageResolver resolves an image reference at its registry: images.Copier.
type ImageResolver interface {
	Describe(ctx context.Context, ref string) (*remote.Descriptor, []string, error)
}

var _ ImageResolver = (*images.Copier)(nil)

// imageTimeout bounds the resolution of one image.
const imageTimeout = 30 * time.Second

// checkImages resolves each image the checked workloads name (not
// ferry's own restore-wait init container), once: an
// image the registry does not have is missing, and one whose digest is
// not among those the backup recorded (when it recorded any) has changed.
// A registry that cannot be reached from here is said, not counted as a
// failure: the workload's own row says whether the nodes pulled it.
func checkImages(ctx context.Context, r ImageResolver, recorded map[string]bool, states []state) []report.Check {
	users := map[string][]string{}
	for _, s := range states {
		if s.skip || s.spec == nil {
			continue
		}
		u := kindName(s.obj.Resource) + " " + s.obj.Namespace + "/" + s.obj.Name
		for _, c := range append(append([]corev1.Container(nil), s.spec.InitContainers...), s.spec.Containers...) {
			if c.Name == v1alpha1.RestoreWaitContainer {
				continue // ferry's own, added by the restore: not the application's
			}
			if l := users[c.Image]; c.Image != "" && (len(l) == 0 || l[len(l)-1] != u) {
				users[c.Image] = append(users[c.Image], u)
			}
		}
	}
	refs := make([]string, 0, len(users))
	for ref := range users {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	var out []report.Check
	for _, ref := range refs {
		out = append(out, checkImage(ctx, r, recorded, ref, users[ref]))
	}
	return out
}

func checkImage(ctx context.Context, r ImageResolver, recorded map[string]bool, ref string, users []string) report.Check {
	ch := report.Check{Kind: report.KindImage, Name: ref}
	usedBy := "used by " + strings.Join(users, ", ")
	if len(users) > 3 {
		usedBy = "used by " + strings.Join(users[:3], ", ") + " and more"
	}
	ictx, cancel := context.WithTimeout(ctx, imageTimeout)
	defer cancel()
	desc, _, err := r.Describe(ictx, ref)
	var te *transport.Error
	switch {
	case err == nil:
		ch.Detail = desc.Digest.String()
		ch.OK, ch.Outcome, ch.Message = true, "present", usedBy
		if len(recorded) > 0 && !recorded[desc.Digest.String()] {
			ch.OK, ch.Outcome, ch.Reason = false, "changed", "DigestNotRecorded"
			ch.Message = "the registry names digest " + desc.Digest.String() + ", which the backup did not record for any image; " + usedBy
		}
	case errors.As(err, &te) && (te.StatusCode == http.StatusNotFound || hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode)):
		ch.Outcome, ch.Reason, ch.Message = "missing", "NotFound", err.Error()+"; "+usedBy
	case errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden):
		// A private registry: the nodes pull with the pods' own
		// credentials, which ferry does not have here.
		ch.OK, ch.Outcome, ch.Reason, ch.Message = true, "not checked", http.StatusText(te.StatusCode), "no credentials for this registry where ferry runs; the workload's row says whether the nodes pulled it: "+err.Error()+"; "+usedBy
	case errors.As(err, &te):
		ch.Outcome, ch.Reason, ch.Message = "not resolved", http.StatusText(te.StatusCode), err.Error()+"; "+usedBy
	default:
		// Unreachable from here, which says nothing of the target's nodes.
		ch.OK, ch.Outcome, ch.Reason, ch.Message = true, "not checked", "Unreachable", err.Error()+"; "+usedBy
	}
	return ch
}

func hasCode(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}
