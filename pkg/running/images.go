package running

import (
	"context"
	"errors"
	"fmt"
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
	// ReferrersOf lists the referrers of ref's manifest (and of an
	// index's manifests) at its registry.
	ReferrersOf(ctx context.Context, ref string) ([]images.Referrer, error)
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
func checkImages(ctx context.Context, r ImageResolver, recorded map[string]bool, referrers map[string][]images.Referrer, states []state) []report.Check {
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
		ch := checkImage(ctx, r, recorded, ref, users[ref])
		if ch.OK && ch.Outcome == "present" && len(referrers[ch.Detail]) > 0 {
			checkReferrers(ctx, r, ref, referrers[ch.Detail], &ch)
		}
		out = append(out, ch)
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

// checkReferrers compares the referrers (signatures, attestations,
// SBOMs) that travelled with an image with those its registry lists:
// one missing fails the check, as a policy that checks signatures would
// refuse the image's pods.
func checkReferrers(ctx context.Context, r ImageResolver, ref string, want []images.Referrer, ch *report.Check) {
	ictx, cancel := context.WithTimeout(ctx, imageTimeout)
	defer cancel()
	got, err := r.ReferrersOf(ictx, ref)
	if err != nil {
		ch.OK, ch.Outcome, ch.Reason = false, "referrers not listed", "ReferrersUnreadable"
		ch.Message = fmt.Sprintf("its %d referrers could not be listed: %v; %s", len(want), err, ch.Message)
		return
	}
	have := map[string]bool{}
	for _, g := range got {
		have[g.Digest] = true
	}
	var missing, present []string
	for _, w := range want {
		if have[w.Digest] {
			present = append(present, w.Digest)
		} else {
			missing = append(missing, fmt.Sprintf("%s (%s of %s)", w.Digest, referrerKind(w), w.Subject))
		}
	}
	if len(missing) > 0 {
		ch.OK, ch.Outcome, ch.Reason = false, "referrers missing", "ReferrersMissing"
		ch.Message = fmt.Sprintf("%d of the %d referrers (signatures, attestations, SBOMs) that travelled with it are not in the registry: %s; a policy that checks signatures refuses its pods; %s", len(missing), len(want), strings.Join(missing, ", "), ch.Message)
		return
	}
	ch.Message = fmt.Sprintf("%d referrers present: %s; %s", len(present), strings.Join(present, ", "), ch.Message)
}

func referrerKind(r images.Referrer) string {
	if r.Tag != "" {
		return "tag " + r.Tag
	}
	if r.ArtifactType != "" {
		return r.ArtifactType
	}
	return r.MediaType
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
