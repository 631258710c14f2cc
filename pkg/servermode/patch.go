package servermode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchStatus replaces obj's status with a JSON patch (RFC 6902) whose
// first operation tests that metadata.uid is still orig's: the API server
// refuses it (422 Invalid, "testing value ... failed") when the object of
// that name is no longer the one this run worked on (deleted and created
// again), so that a run's outcome never lands on another object of the
// same name. A missing object is NotFound, as with any patch. The server
// is the only writer of these statuses, so replacing the whole status
// loses nothing. reader (uncached) tells a failed uid test from an
// invalid status.
func patchStatus(ctx context.Context, c client.Client, reader client.Reader, obj, orig client.Object) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var full struct {
		Status json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(data, &full); err != nil {
		return err
	}
	if len(full.Status) == 0 {
		full.Status = json.RawMessage("{}")
	}
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(orig.GetUID())},
		{"op": "replace", "path": "/status", "value": full.Status},
	}
	if data, err = json.Marshal(ops); err != nil {
		return fmt.Errorf("status patch of %s: %w", orig.GetName(), err)
	}
	err = c.Status().Patch(ctx, obj, client.RawPatch(types.JSONPatchType, data))
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %w", orig.GetName(), errGone)
	}
	if apierrors.IsInvalid(err) && objectGone(ctx, reader, orig) {
		// The uid test failed (not an invalid status).
		return fmt.Errorf("%s: %w", orig.GetName(), errGone)
	}
	return err
}

// errGone is wrapped by patchStatus when the object this run worked on is
// gone: deleted, or deleted and created again under its name.
var errGone = errors.New("deleted while this run worked on it")

// ignoreGone drops errGone: there is no object left to write to.
func ignoreGone(err error) error {
	if errors.Is(err, errGone) {
		return nil
	}
	return err
}

// objectGone reports whether o (as this run knew it) is deleted, or
// replaced by another object of its name, reading uncached.
func objectGone(ctx context.Context, reader client.Reader, o client.Object) bool {
	cur := o.DeepCopyObject().(client.Object)
	err := reader.Get(ctx, client.ObjectKeyFromObject(o), cur)
	return apierrors.IsNotFound(err) || (err == nil && cur.GetUID() != o.GetUID())
}
