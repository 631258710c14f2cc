// Package install registers the hub's API group, ferry.dev (the internal
// version, v1alpha1 and v1beta1, v1beta1 preferred), in a scheme.
package install

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1alpha1"
	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// Install registers the API group and its versions in scheme.
func Install(scheme *runtime.Scheme) {
	utilruntime.Must(ferry.AddToScheme(scheme))
	utilruntime.Must(v1beta1.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(v1beta1.SchemeGroupVersion, v1alpha1.SchemeGroupVersion))
}
