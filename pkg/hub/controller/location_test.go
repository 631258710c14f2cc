package controller

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// TestBackupAccess: a Backup's location is opened through the
// BackupStorageLocation it was written to. Two locations at one URL (a
// default with read-write keys and an identity, another with read-only
// keys): a Backup that named none was written through the default and is
// read back through it; one that named the other, through that one (a new
// user's finding: the first location in list order was taken).
func TestBackupAccess(t *testing.T) {
	const url = "s3://b?endpoint=http://10.0.0.1:9000"
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "default", Name: name} }
	archive := &v1beta1.BackupStorageLocation{ObjectMeta: meta("archive"), Spec: v1beta1.BackupStorageLocationSpec{URL: url,
		CredentialRef: &v1beta1.LocalObjectReference{Name: "ro-keys"}}}
	primary := &v1beta1.BackupStorageLocation{ObjectMeta: meta("primary"), Spec: v1beta1.BackupStorageLocationSpec{URL: url, Default: true,
		CredentialRef: &v1beta1.LocalObjectReference{Name: "rw-keys"},
		Encryption:    &v1beta1.Encryption{IdentityRef: &v1beta1.CredentialKeyReference{Name: "age", Key: "key.txt"}}}}
	elsewhere := &v1beta1.BackupStorageLocation{ObjectMeta: meta("elsewhere"), Spec: v1beta1.BackupStorageLocationSpec{URL: "s3://other", Default: false}}
	reader := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(archive, primary, elsewhere).Build()
	for _, c := range []struct {
		name, named, url, wantCred string
		wantIdentity               bool
	}{
		{"named none: the default", "", url, "rw-keys", true},
		{"named archive", "archive", url, "ro-keys", false},
		{"named a location now elsewhere: one at its URL", "elsewhere", url, "rw-keys", true},
		{"no location at its URL: the hub's own", "", "s3://gone", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &v1beta1.Backup{ObjectMeta: meta("b"), Spec: v1beta1.BackupSpec{StorageLocationName: c.named}, Status: v1beta1.BackupStatus{StorageLocation: c.url}}
			a, err := backupAccess(context.Background(), reader, b)
			if err != nil {
				t.Fatal(err)
			}
			cred := ""
			if a.credentialRef != nil {
				cred = a.credentialRef.Name
			}
			if cred != c.wantCred || (a.encryption.IdentityRef != nil) != c.wantIdentity || a.url != c.url {
				t.Errorf("backupAccess: credential %q, identity %v, url %s; want %q, %v, %s", cred, a.encryption.IdentityRef != nil, a.url, c.wantCred, c.wantIdentity, c.url)
			}
		})
	}
}
