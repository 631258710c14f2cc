package transform

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeferry/ferry/pkg/hooks"
)

// InitHook adds a restored pod's init-container restore hook (Velero's
// init.hook.restore.velero.io/ annotations, or ferry's): the hook's
// container runs first, after ferry-restore-wait when the pod waits for
// its volume data. A hook whose annotations cannot be read is not added,
// and the note says why.
func InitHook(_ *Context, u *unstructured.Unstructured) []string {
	changed, err := hooks.InjectInitContainer(u)
	switch {
	case err != nil:
		return []string{"init-container restore hook not added: " + err.Error()}
	case changed:
		return []string{"init container of the pod's init-container restore hook added"}
	}
	return nil
}
