package servermode

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/kube"
	"github.com/kubeferry/ferry/pkg/store"
)

// TestHelperSettings: the server's helper pods get every helper setting
// the CLI and the hub give theirs (the kubelet's pods directory, the
// unschedulable timeout, sparse files), from the server's options, and the
// location's credentials from its Secret. Server mode once built them with
// the image, password and start timeout only.
func TestHelperSettings(t *testing.T) {
	opts := Options{RestoreHelperImage: "reg.example/ferry:1", RepositoryPassword: "pw", PodVolumeTimeout: 7 * time.Minute,
		NodePodsDir: "/data/kubelet/pods", HelperUnschedulable: 45 * time.Second, SparseFiles: true}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry", Name: "loc-creds"},
		Data: map[string][]byte{store.EnvAWSAccessKeyID: []byte("ak"), store.EnvAWSSecretAccessKey: []byte("sk")}}
	bsl := &v1alpha1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry", Name: "default"},
		Spec: v1alpha1.BackupStorageLocationSpec{URL: "s3://bucket?endpoint=http://10.0.0.1:9000", Credential: &v1alpha1.SecretReference{Name: "loc-creds"}}}
	reader := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(secret).Build()
	h, err := helpers(context.Background(), reader, &kube.Cluster{Typed: k8sfake.NewClientset()}, bsl, opts.helperSettings(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Image != opts.RestoreHelperImage || h.NodePodsDir != opts.NodePodsDir || h.Unschedulable != opts.HelperUnschedulable ||
		!h.Sparse || h.StartTimeout != opts.PodVolumeTimeout {
		t.Errorf("helpers: image %q, pods dir %q, unschedulable %v, sparse %v, start %v; want the server's options %+v",
			h.Image, h.NodePodsDir, h.Unschedulable, h.Sparse, h.StartTimeout, opts)
	}
	if h.Env[store.EnvAWSAccessKeyID] != "ak" || h.Env[store.EnvAWSSecretAccessKey] != "sk" {
		t.Errorf("helpers' Secret environment %v lacks the location's credentials", h.Env)
	}
	opts.RepositoryPassword = ""
	if _, err := helpers(context.Background(), reader, &kube.Cluster{Typed: k8sfake.NewClientset()}, bsl, opts.helperSettings(), nil); err == nil {
		t.Error("helpers without a repository password: no error")
	}
}
