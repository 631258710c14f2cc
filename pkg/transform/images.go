package transform

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/images"
)

// Images rewrites the image of every container, init container and
// ephemeral container in the pod templates of Pods, Deployments,
// ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs and
// ReplicationControllers by the registry mappings (images.Rewriter: tag
// kept, known digest pinned). A malformed reference is left as it is,
// with a note, and reported to OnImageError.
func Images(c *Context, u *unstructured.Unstructured) []string {
	if c.Images.Empty() {
		return nil
	}
	notes, errs := images.RewriteObject(c.Images, u.Object)
	for _, err := range errs {
		notes = append(notes, "image left as is: "+err.Error())
		if c.OnImageError != nil {
			c.OnImageError(err)
		}
	}
	return notes
}
