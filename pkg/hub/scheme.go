package hub

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/install"
	"github.com/kubeferry/ferry/pkg/hub/registry/event"
)

var (
	// Scheme holds the hub's kinds in every version.
	Scheme = runtime.NewScheme()
	// Codecs are the hub's serializers.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	install.Install(Scheme)
	// The generic server's options and status types, as k8s.io/apiserver
	// wants them (as sample-apiserver registers them).
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddUnversionedTypes(schema.GroupVersion{Group: "", Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	// core/v1 Events, which the hub serves (pkg/hub/registry/event). They
	// have no internal version of their own: the same type is registered
	// as the internal one, so that no conversion is needed.
	Scheme.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.Event{}, &corev1.EventList{})
	Scheme.AddKnownTypes(schema.GroupVersion{Version: runtime.APIVersionInternal}, &corev1.Event{}, &corev1.EventList{})
	if err := Scheme.AddFieldLabelConversionFunc(corev1.SchemeGroupVersion.WithKind("Event"), event.ConvertFieldLabel); err != nil {
		panic(err)
	}
}
