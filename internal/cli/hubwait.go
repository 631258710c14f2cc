package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// Retry delays of a Migration's watch: doubled after each failure, from
// the first to at most the last.
const (
	watchRetryMin = 200 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// runHub creates the Migration in the hub and, with --wait, follows it
// until it ends.
func (o *migrateOptions) runHub(ctx context.Context) error {
	c, err := hubClient(o.hub.kubeconfig)
	if err != nil {
		return err
	}
	m := &hubv1beta1.Migration{ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: o.hub.namespace}, Spec: o.hub.spec}
	removeIdentity, err := o.storeIdentity(ctx, c)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, m); err != nil {
		removeIdentity()
		return err // the hub's own words, field paths included
	}
	if ref := m.Spec.Encryption.IdentityRef; ref != nil {
		fmt.Fprintf(o.stderr, "the encryption identity is stored in the hub as Credential %s/%s (encrypted at rest); delete it with the migration\n", o.hub.namespace, ref.Name)
	}
	if !o.hub.wait {
		if o.output != "table" {
			return printMigration(o.globals, m)
		}
		fmt.Fprintf(o.stdout, "migration %s created in the hub (namespace %s); follow it with `kubectl --kubeconfig %s -n %s get migrations %s` or --wait\n",
			o.name, o.hub.namespace, o.hub.kubeconfig, o.hub.namespace, o.name)
		return nil
	}
	w := &migrationWatch{c: c, key: crclient.ObjectKeyFromObject(m), onPhase: func(p hubv1beta1.MigrationPhase) {
		fmt.Fprintf(o.stderr, "migration %s: %s\n", o.name, p)
	}, reconnect: func() (crclient.WithWatch, error) { return hubClient(o.hub.kubeconfig) }}
	if m, err = w.run(ctx, o.hub.waitTimeout); err != nil {
		return err
	}
	if o.output != "table" {
		if err := printMigration(o.globals, m); err != nil {
			return err
		}
	} else {
		printMigrationSummary(o.globals, m)
	}
	return migrationExit(m)
}

// storeIdentity stores the --encryption-identity file in the hub as the
// Credential spec.encryption.identityRef names, before the Migration
// that needs it exists; the returned func deletes it again (for a
// Migration the hub refused). An existing Credential of that name is not
// overwritten: it may be another Migration's.
func (o *migrateOptions) storeIdentity(ctx context.Context, c crclient.Client) (func(), error) {
	ref := o.hub.spec.Encryption.IdentityRef
	if ref == nil {
		return func() {}, nil
	}
	// A Migration of that name exists: the Credential is its, and the hub
	// would refuse the Migration anyway.
	err := c.Get(ctx, crclient.ObjectKey{Namespace: o.hub.namespace, Name: o.name}, &hubv1beta1.Migration{})
	if err == nil {
		return nil, fmt.Errorf("migration %s already exists in the hub (namespace %s): choose another --name, or delete it (and its Credential %s) first", o.name, o.hub.namespace, ref.Name)
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	cred := &hubv1beta1.Credential{
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: o.hub.namespace},
		Data:       map[string][]byte{ref.Key: o.hub.identity},
	}
	if err := c.Create(ctx, cred); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("--encryption-identity: the hub already has Credential %s/%s, where migrate --hub stores the identity of migration %s: delete it, or choose another --name", o.hub.namespace, ref.Name, o.name)
		}
		return nil, fmt.Errorf("--encryption-identity: storing it in the hub: %w", err)
	}
	return func() { _ = c.Delete(context.WithoutCancel(ctx), cred) }, nil
}

// printMigration prints m for -o json|yaml, with its kind.
func printMigration(g *globals, m *hubv1beta1.Migration) error {
	m.APIVersion, m.Kind = hubv1beta1.SchemeGroupVersion.String(), "Migration"
	return printObject(g.stdout, g.output, m)
}

// printMigrationSummary prints how an ended Migration went.
func printMigrationSummary(g *globals, m *hubv1beta1.Migration) {
	s := m.Status
	if m.Spec.PreflightOnly {
		fmt.Fprintf(g.stdout, "Migration %s (pre-flight only) %s\n", m.Name, s.Phase)
		if s.Preflight != nil {
			printPreflightStatus(g, s.Preflight)
		}
		if s.Reason != "" {
			fmt.Fprintf(g.stdout, "\nReason: %s\nMessage: %s\n", s.Reason, s.Message)
		}
		return
	}
	fmt.Fprintf(g.stdout, "Migration %s %s: %d backed up, %d restored, %d skipped, %d failed\n",
		m.Name, s.Phase, s.Counts.BackedUp, s.Counts.Restored, s.Counts.Skipped, s.Counts.Failed)
	for _, l := range []struct{ name, value string }{{"Report", s.ReportLocation}, {"Reason", s.Reason}, {"Message", s.Message}} {
		if l.value != "" {
			fmt.Fprintf(g.stdout, "%s: %s\n", l.name, l.value)
		}
	}
}

// migrationExit is the exit code error of an ended Migration, as a local
// migrate's: none for Completed, 2 for PartiallyFailed, 1 for Failed.
func migrationExit(m *hubv1beta1.Migration) error {
	switch m.Status.Phase {
	case hubv1beta1.PhaseCompleted:
		return nil
	case hubv1beta1.PhasePartiallyFailed:
		return &exitError{code: ExitPartiallyFailed, msg: "migration " + m.Name + " partially failed"}
	}
	msg := "migration " + m.Name + " " + string(m.Status.Phase)
	if m.Status.Reason != "" {
		msg += ": " + m.Status.Reason
	}
	if m.Status.Message != "" {
		msg += ": " + m.Status.Message
	}
	return &exitError{code: ExitFailed, msg: msg}
}

func terminalMigration(p hubv1beta1.MigrationPhase) bool {
	return p == hubv1beta1.PhaseCompleted || p == hubv1beta1.PhasePartiallyFailed || p == hubv1beta1.PhaseFailed
}

// migrationWatch follows one Migration in the hub until its phase is
// terminal, calling onPhase at each phase it sees.
type migrationWatch struct {
	c       crclient.WithWatch
	key     crclient.ObjectKey
	onPhase func(hubv1beta1.MigrationPhase)
	last    hubv1beta1.MigrationPhase
	// reconnect, if set, makes a new client after an error that is not
	// the hub's answer: a hub restarted on another port (--secure-port 0)
	// has rewritten its kubeconfig.
	reconnect func() (crclient.WithWatch, error)
}

// errMigrationDeleted ends a wait: the Migration was deleted.
var errMigrationDeleted = errors.New("deleted from the hub")

// run gets the Migration and watches it from there; when the watch ends
// (its channel closed, the hub restarting, an expired resourceVersion) it
// gets and watches again, after a delay that grows while the hub cannot
// be reached, until timeout.
func (w *migrationWatch) run(ctx context.Context, timeout time.Duration) (*hubv1beta1.Migration, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := watchRetryMin
	var lastErr error
	for {
		m, got, err := w.once(wctx)
		if m != nil {
			return m, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err() // interrupted
		}
		if wctx.Err() != nil {
			return nil, w.timedOut(timeout, lastErr)
		}
		if errors.Is(err, errMigrationDeleted) || apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("migration %s: %w", w.key.Name, err)
		}
		if err != nil {
			lastErr = err
			if _, isStatus := err.(apierrors.APIStatus); !isStatus && w.reconnect != nil {
				if c, rerr := w.reconnect(); rerr == nil {
					w.c = c
				}
			}
		}
		if got {
			delay = watchRetryMin
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, w.timedOut(timeout, lastErr)
		case <-time.After(delay):
		}
		delay = min(2*delay, watchRetryMax)
	}
}

// timedOut is the error of a wait that reached --wait-timeout.
func (w *migrationWatch) timedOut(timeout time.Duration, lastErr error) error {
	phase := string(w.last)
	if phase == "" {
		phase = "without a phase (no hub controller has taken it yet)"
	}
	msg := fmt.Sprintf("migration %s: still %s after --wait-timeout %s; it goes on in the hub", w.key.Name, phase, timeout)
	if lastErr != nil {
		msg += fmt.Sprintf(" (last error: %v)", lastErr)
	}
	return errors.New(msg)
}

// once gets the Migration and watches it from its resourceVersion. It
// returns the Migration once its phase is terminal; else whether the get
// succeeded, and why the watch ended (nil: its channel closed).
func (w *migrationWatch) once(ctx context.Context) (*hubv1beta1.Migration, bool, error) {
	m := &hubv1beta1.Migration{}
	if err := w.c.Get(ctx, w.key, m); err != nil {
		return nil, false, err
	}
	if w.seen(m) {
		return m, true, nil
	}
	wi, err := w.c.Watch(ctx, &hubv1beta1.MigrationList{}, &crclient.ListOptions{
		Namespace:     w.key.Namespace,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", w.key.Name),
		Raw:           &metav1.ListOptions{ResourceVersion: m.ResourceVersion},
	})
	if err != nil {
		return nil, true, err
	}
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, true, ctx.Err()
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return nil, true, nil
			}
			switch ev.Type {
			case watch.Error:
				return nil, true, apierrors.FromObject(ev.Object)
			case watch.Deleted:
				return nil, true, errMigrationDeleted
			case watch.Added, watch.Modified:
				if m, ok := ev.Object.(*hubv1beta1.Migration); ok && w.seen(m) {
					return m, true, nil
				}
			}
		}
	}
}

// seen notes m's phase, calling onPhase when it changed, and says whether
// it is terminal.
func (w *migrationWatch) seen(m *hubv1beta1.Migration) bool {
	if m.Status.Phase != w.last {
		w.last = m.Status.Phase
		w.onPhase(m.Status.Phase)
	}
	return terminalMigration(m.Status.Phase)
}
