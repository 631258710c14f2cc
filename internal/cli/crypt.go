package cli

import (
	"errors"
	"fmt"

	"filippo.io/age"

	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/store"
)

// cryptFlags are the age encryption flags: recipients encrypt what a
// backup writes, an identity decrypts what a restore or describe reads.
type cryptFlags struct {
	recipients []string
	identity   string
}

func (c *cryptFlags) registerRecipients(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&c.recipients, "encryption-recipient", nil,
		"age public key (age1...) to encrypt the archive and the results for; repeatable")
}

func (c *cryptFlags) registerIdentity(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.identity, "encryption-identity", "",
		"age identity file (from age-keygen) to decrypt an encrypted backup; alone, what is written is encrypted for its public key; with migrate --hub it is stored in the hub as a Credential")
}

// apply configures loc. A restore's own results are encrypted for the
// identity's public keys, so they are as private as the backup.
func (c *cryptFlags) apply(loc *store.Location) error {
	enc, err := c.encryption()
	if err != nil {
		return err
	}
	if enc != nil {
		loc.SetEncryption(enc)
	}
	return nil
}

// encryption is store.NewEncryption of the flags, errors naming them.
func (c *cryptFlags) encryption() (*store.Encryption, error) {
	var ids []age.Identity
	if c.identity != "" {
		var err error
		if ids, err = store.LoadIdentities(c.identity); err != nil {
			return nil, fmt.Errorf("--encryption-identity: %w", err)
		}
	}
	enc, err := store.NewEncryption(c.recipients, ids)
	if errors.Is(err, store.ErrNoMatchingIdentity) {
		return nil, fmt.Errorf("--encryption-identity %s: %w (--encryption-recipient)", c.identity, err)
	}
	if err != nil {
		return nil, fmt.Errorf("--encryption-recipient: %w", err)
	}
	return enc, nil
}

// complete checks that the identity file loads (the store loads it again
// when opened).
func (c *cryptFlags) complete() error {
	if c.identity != "" {
		if _, err := store.LoadIdentities(c.identity); err != nil {
			return fmt.Errorf("--encryption-identity: %w", err)
		}
	}
	return nil
}

// validate parses the recipients, and checks that an identity given with
// them matches one, before anything is written.
func (c *cryptFlags) validate() error {
	_, err := c.encryption()
	return err
}
