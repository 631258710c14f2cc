package cli

import (
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeferry/ferry/pkg/deadline"
	hubv1beta1 "github.com/kubeferry/ferry/pkg/hub/apis/ferry/v1beta1"
)

// stepDeadlines are the --backup-timeout, --restore-timeout and
// --verify-timeout flags: how long each step may take before it fails
// (0: no deadline).
type stepDeadlines struct {
	backup, restore, verify time.Duration
	// fl tells the flags given, for a hub Migration's spec.timeouts.
	fl *pflag.FlagSet
}

// register adds the flags; withVerify adds --verify-timeout too.
func (d *stepDeadlines) register(fl *pflag.FlagSet, withVerify bool) {
	d.fl = fl
	fl.DurationVar(&d.backup, "backup-timeout", deadline.DefaultBackup, "how long a backup (items, images, volume data) may take before it fails and is left Incomplete (0: no deadline)")
	fl.DurationVar(&d.restore, "restore-timeout", deadline.DefaultRestore, "how long a restore (volume data included) may take before it fails; run again, it finishes what it left (0: no deadline)")
	if withVerify {
		fl.DurationVar(&d.verify, "verify-timeout", deadline.DefaultVerify, "how long the verification may take before it fails (0: no deadline)")
	}
}

// validate refuses a negative deadline, as the engine does.
func (d *stepDeadlines) validate() error {
	for _, dl := range []deadline.Deadline{d.backupDeadline(), d.restoreDeadline(), d.verifyDeadline()} {
		if err := dl.Validate(); err != nil {
			return err
		}
	}
	return nil
}

func (d *stepDeadlines) backupDeadline() deadline.Deadline {
	return deadline.Deadline{After: d.backup, Field: "--backup-timeout"}
}

func (d *stepDeadlines) restoreDeadline() deadline.Deadline {
	return deadline.Deadline{After: d.restore, Field: "--restore-timeout"}
}

func (d *stepDeadlines) verifyDeadline() deadline.Deadline {
	return deadline.Deadline{After: d.verify, Field: "--verify-timeout"}
}

// migrationTimeouts is a hub Migration's spec.timeouts: the flags given
// (the others are the hub's defaults), or nil.
func (d *stepDeadlines) migrationTimeouts() *hubv1beta1.MigrationTimeouts {
	var t hubv1beta1.MigrationTimeouts
	given := func(name string, v time.Duration) *metav1.Duration {
		if d.fl == nil || !d.fl.Changed(name) {
			return nil
		}
		return &metav1.Duration{Duration: v}
	}
	t.Backup, t.Restore, t.Verify = given("backup-timeout", d.backup), given("restore-timeout", d.restore), given("verify-timeout", d.verify)
	if t == (hubv1beta1.MigrationTimeouts{}) {
		return nil
	}
	return &t
}
