package controller

import (
	"context"
	"strings"
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

// TestBackupAccessNoLocation: a Backup no location of its namespace
// reaches any more is not opened with the hub's own credentials (a team
// could reach another's store so, a reviewer's finding): LocationNotFound,
// naming the URL.
func TestBackupAccessNoLocation(t *testing.T) {
	reader := fake.NewClientBuilder().WithScheme(Scheme()).Build()
	b := &v1beta1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "b"}, Status: v1beta1.BackupStatus{StorageLocation: "s3://gone"}}
	_, err := backupAccess(context.Background(), reader, b)
	if err == nil || !strings.Contains(err.Error(), "no BackupStorageLocation of namespace team has its URL (status.storageLocation s3://gone)") {
		t.Errorf("backupAccess with no location at the Backup's URL: %v, want LocationNotFound naming it", err)
	}
}

// TestCredentialStandsAlone: a Credential that says nobody (an s3 one
// with only a region, an empty one, an Azure one without a key) or a gs
// key that is not a service account's (an external account's JSON names
// a file the hub would read and a URL it would send it to) is refused: it
// would reach the store as the hub. Reviewer's findings.
func TestCredentialStandsAlone(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "team", Name: name} }
	external := `{"type":"external_account","token_url":"http://127.0.0.1:9999/token","credential_source":{"file":"/var/lib/ferry-hub/tokens.csv"}}`
	sa := `{"type":"service_account","client_email":"a@b.iam.gserviceaccount.com","private_key":"x"}`
	reader := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(
		&v1beta1.Credential{ObjectMeta: meta("region-only"), Data: map[string][]byte{"AWS_REGION": []byte("us-east-1")}},
		&v1beta1.Credential{ObjectMeta: meta("keys"), Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("a"), "AWS_SECRET_ACCESS_KEY": []byte("b")}},
		&v1beta1.Credential{ObjectMeta: meta("empty")},
		&v1beta1.Credential{ObjectMeta: meta("external"), Data: map[string][]byte{"GOOGLE_APPLICATION_CREDENTIALS_JSON": []byte(external)}},
		&v1beta1.Credential{ObjectMeta: meta("sa"), Data: map[string][]byte{"GOOGLE_APPLICATION_CREDENTIALS_JSON": []byte(sa)}},
		&v1beta1.Credential{ObjectMeta: meta("account-only"), Data: map[string][]byte{"AZURE_STORAGE_ACCOUNT": []byte("acct")}},
	).Build()
	for _, c := range []struct{ url, credential, want string }{
		{"s3://b?region=x", "region-only", "no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		{"s3://b?region=x", "empty", "no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		{"gs://b", "external", `of type "external_account": only a service-account key`},
		{"azblob://c", "account-only", "go together"},
		{"s3://b?region=x", "keys", ""},
		{"gs://b", "sa", ""},
	} {
		a := access{namespace: "team", url: c.url, credentialRef: &v1beta1.LocalObjectReference{Name: c.credential}, credentialField: "spec.credentialRef"}
		_, err := a.credentials(context.Background(), reader)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s with Credential %s: %v, want accepted", c.url, c.credential, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s with Credential %s: %v, want InvalidCredential saying %q", c.url, c.credential, err, c.want)
		}
	}
}
