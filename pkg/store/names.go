package store

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Name length limits. A name becomes a folder and file names in the store
// (<name>-results.json.gz, plus a staging suffix of about 21 characters),
// which must fit the 255-byte file-name limit of common filesystems; a
// restore's default name is its backup's name plus 19 characters.
const (
	MaxRestoreNameLength = 200
	MaxBackupNameLength  = MaxRestoreNameLength - 19
)

// ValidateBackupName checks that name is a DNS-1123 subdomain of at most
// MaxBackupNameLength characters. Every store call that takes a backup name
// checks it, so that no name can reach outside its own folder ("", ".", "..").
func ValidateBackupName(name string) error { return validateName("backup", name, MaxBackupNameLength) }

// ValidateRestoreName checks a restore name the same way, up to MaxRestoreNameLength.
func ValidateRestoreName(name string) error {
	return validateName("restore", name, MaxRestoreNameLength)
}

func validateName(what, name string, max int) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%s name %q: %s", what, name, errs[0])
	}
	if len(name) > max {
		return fmt.Errorf("%s name %q: must be no more than %d characters", what, name, max)
	}
	return nil
}
