package cli

import (
	"fmt"

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
		"age identity file (from age-keygen) to decrypt an encrypted backup")
}

// apply configures loc. A restore's own results are encrypted for the
// identity's public keys, so they are as private as the backup.
func (c *cryptFlags) apply(loc *store.Location) error {
	enc := &store.Encryption{}
	var err error
	if enc.Recipients, err = store.ParseRecipients(c.recipients); err != nil {
		return fmt.Errorf("--encryption-recipient: %w", err)
	}
	if c.identity != "" {
		if enc.Identities, err = store.LoadIdentities(c.identity); err != nil {
			return fmt.Errorf("--encryption-identity: %w", err)
		}
		if len(enc.Recipients) == 0 {
			enc.Recipients = store.RecipientsOf(enc.Identities)
		}
	}
	loc.SetEncryption(enc)
	return nil
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

// validate parses the recipients before anything is written.
func (c *cryptFlags) validate() error {
	if _, err := store.ParseRecipients(c.recipients); err != nil {
		return fmt.Errorf("--encryption-recipient: %w", err)
	}
	return nil
}
