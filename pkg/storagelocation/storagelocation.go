// Package storagelocation owns the BackupStorageLocation: finding the
// object a Backup, Restore or pod volume names in a cluster (or the
// default one), opening its store (pkg/store) with the credentials of its
// Secret, and checking that it is available (Check). Server mode's
// controllers, the node agents and the hub's location controller share it.
package storagelocation

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/store"
)

// Resolve returns the BackupStorageLocation called name in ns, or
// for name "" the one marked default (the first by name if several are).
// Errors name the location, or are a *field.Error for
// spec.storageLocationName saying that none is default.
func Resolve(ctx context.Context, c client.Reader, ns, name string) (*v1alpha1.BackupStorageLocation, error) {
	if name != "" {
		bsl := &v1alpha1.BackupStorageLocation{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, bsl); err != nil {
			return nil, fmt.Errorf("backup storage location %q: %w", name, err)
		}
		return bsl, nil
	}
	list := &v1alpha1.BackupStorageLocationList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing backup storage locations: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		if list.Items[i].Spec.Default {
			return &list.Items[i], nil
		}
	}
	return nil, field.Required(field.NewPath("spec", "storageLocationName"), fmt.Sprintf("no BackupStorageLocation in namespace %s is default", ns))
}

// Open opens bsl's store with the credentials of its Secret (read
// with secrets, an uncached reader, so the server needs only "get" on
// Secrets in its namespace). pkg/store checks that the bucket can be listed.
func Open(ctx context.Context, secrets client.Reader, bsl *v1alpha1.BackupStorageLocation) (*store.Location, error) {
	creds, err := Credentials(ctx, secrets, bsl)
	if err != nil {
		return nil, err
	}
	return OpenWith(ctx, bsl, creds)
}

// OpenWith opens bsl's store with creds, read by Credentials: every key of
// the Secret goes to store.WithCredentials, which takes those of the
// location's scheme (s3, gs, azblob; store.CredentialKeys) and refuses
// others, naming the key. nil creds (no Secret) leave the store to the
// server's environment or workload identity.
func OpenWith(ctx context.Context, bsl *v1alpha1.BackupStorageLocation, creds map[string]string) (*store.Location, error) {
	var opts []store.OpenOption
	if creds != nil {
		opts = append(opts, store.WithCredentials(creds))
	}
	return store.Open(ctx, bsl.Spec.URL, opts...)
}

// Credentials reads the credentials of bsl from its Secret (nil
// when it names none).
func Credentials(ctx context.Context, secrets client.Reader, bsl *v1alpha1.BackupStorageLocation) (map[string]string, error) {
	ref := bsl.Spec.Credential
	if ref == nil {
		return nil, nil
	}
	s := &corev1.Secret{}
	if err := secrets.Get(ctx, client.ObjectKey{Namespace: bsl.Namespace, Name: ref.Name}, s); err != nil {
		return nil, fmt.Errorf("credential Secret %s/%s of backup storage location %s: %w", bsl.Namespace, ref.Name, bsl.Name, err)
	}
	env := map[string]string{}
	for k, v := range s.Data {
		env[k] = string(v)
	}
	for k, v := range s.StringData {
		env[k] = v
	}
	return env, nil
}

// CheckTimeout bounds one check of a location (Check) by default.
const CheckTimeout = 30 * time.Second

// Check is the one check of a backup storage location, for server mode's
// BackupStorageLocations and the hub's alike: open opens its store, and
// pkg/store lists it (access denied, bucket not found, unreachable, a bad
// URL, a missing Secret are its reasons), within timeout (CheckTimeout
// when 0). nil means Available.
func Check(ctx context.Context, timeout time.Duration, open func(context.Context) (*store.Location, error)) error {
	if timeout <= 0 {
		timeout = CheckTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	loc, err := open(cctx)
	if err != nil {
		return err
	}
	return loc.Close()
}

// ConditionAvailable is the type of the condition Check's result sets.
const ConditionAvailable = "Available"

// Condition is the Available condition of a location whose check (at its
// generation) ended with err.
func Condition(err error, generation int64) metav1.Condition {
	if err != nil {
		return metav1.Condition{Type: ConditionAvailable, Status: metav1.ConditionFalse, Reason: "ValidationFailed", Message: err.Error(), ObservedGeneration: generation}
	}
	return metav1.Condition{Type: ConditionAvailable, Status: metav1.ConditionTrue, Reason: "Validated", Message: "the store can be listed", ObservedGeneration: generation}
}

// NextCheck is how long until a location is checked again: its
// spec.validationFrequency when set, else def.
func NextCheck(frequency *metav1.Duration, def time.Duration) time.Duration {
	if frequency != nil && frequency.Duration > 0 {
		return frequency.Duration
	}
	return def
}
