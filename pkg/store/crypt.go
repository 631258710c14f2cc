package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"gocloud.dev/blob"
)

// ageHeader starts every age-encrypted object (age-encryption.org/v1).
const ageHeader = "age-encryption.org/v1\n"

// ErrEncrypted is wrapped when an object is encrypted and no identity was
// given to decrypt it.
var ErrEncrypted = errors.New("encrypted with age, and no age identity to decrypt it was given")

// Encryption holds age keys: Recipients (public keys) to encrypt archives
// and results before they leave the machine, Identities (private keys) to
// decrypt them. Either may be empty.
type Encryption struct {
	Recipients []age.Recipient
	Identities []age.Identity
}

// ParseRecipients parses age public keys ("age1..."), one per entry.
func ParseRecipients(keys []string) ([]age.Recipient, error) {
	var out []age.Recipient
	for _, k := range keys {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		rs, err := age.ParseRecipients(strings.NewReader(k))
		if err != nil {
			return nil, fmt.Errorf("age recipient %q: not an age public key: %w", k, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// LoadIdentities reads an age identity file (as written by age-keygen).
// The error names the file but never echoes its content.
func LoadIdentities(path string) ([]age.Identity, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("age identity file: %w", err)
	}
	defer f.Close()
	return ParseIdentities(f, "age identity file "+path)
}

// ParseIdentities reads an age identity file's content (AGE-SECRET-KEY-1...
// lines, # comments) from r; what names its source in the error.
func ParseIdentities(r io.Reader, what string) ([]age.Identity, error) {
	ids, err := age.ParseIdentities(r)
	if err != nil {
		return nil, fmt.Errorf("%s: not an age identity file", what)
	}
	return ids, nil
}

// RecipientsOf returns the public keys of the X25519 identities in ids, so
// that what a restore writes can be encrypted for whoever can read the backup.
func RecipientsOf(ids []age.Identity) []age.Recipient {
	var out []age.Recipient
	for _, id := range ids {
		switch x := id.(type) {
		case *age.X25519Identity:
			out = append(out, x.Recipient())
		case *age.HybridIdentity: // post-quantum (age1pq1...)
			out = append(out, x.Recipient())
		}
	}
	return out
}

// ErrNoMatchingIdentity is wrapped by NewEncryption when none of the
// identities can read what the recipients' encryption writes.
var ErrNoMatchingIdentity = errors.New("none of the age identities matches an encryption recipient, so what is encrypted could not be read back")

// NewEncryption is the one way every front end builds a location's
// encryption: what it writes is encrypted for recipients (age public
// keys), or, when there are none, for the public keys of ids (so that a
// restore's results are as private as the backup); it reads with ids.
// When both are given, one of ids must match a recipient
// (ErrNoMatchingIdentity): a migration reads back what it wrote. nil
// when neither is given.
func NewEncryption(recipients []string, ids []age.Identity) (*Encryption, error) {
	rs, err := ParseRecipients(recipients)
	if err != nil {
		return nil, err
	}
	own := RecipientsOf(ids)
	switch {
	case len(rs) == 0 && len(ids) == 0:
		return nil, nil
	case len(ids) > 0 && len(own) == 0:
		// Never write in the clear what was asked to be encrypted.
		return nil, errors.New("the age identities are of a kind whose public key ferry cannot derive: give the recipients too")
	case len(rs) == 0:
		rs = own
	case len(ids) > 0 && !matches(rs, own):
		return nil, ErrNoMatchingIdentity
	}
	return &Encryption{Recipients: rs, Identities: ids}, nil
}

// matches reports whether one of own is among rs, by public key.
func matches(rs, own []age.Recipient) bool {
	for _, r := range rs {
		for _, o := range own {
			if key(r) != "" && key(r) == key(o) {
				return true
			}
		}
	}
	return false
}

// key is a recipient's public key as text, "" for one without it.
func key(r age.Recipient) string {
	if s, ok := r.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}

// SetEncryption makes the location encrypt what it writes with
// NewSealedWriter and PutSealedJSON, and decrypt what it reads.
func (l *Location) SetEncryption(e *Encryption) { l.enc = e }

// Encrypted reports whether the location encrypts what it writes.
func (l *Location) Encrypted() bool { return l.enc != nil && len(l.enc.Recipients) > 0 }

// SealedWriter streams an object, encrypted when the location has
// recipients. Close commits it; Abort discards it.
type SealedWriter struct {
	io.Writer
	enc    io.WriteCloser
	w      *blob.Writer
	cancel context.CancelFunc
}

// NewSealedWriter opens key for a streaming, possibly encrypted, write.
func (l *Location) NewSealedWriter(ctx context.Context, key string) (*SealedWriter, error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := l.NewWriter(ctx, key)
	if err != nil {
		cancel()
		return nil, err
	}
	sw := &SealedWriter{Writer: w, w: w, cancel: cancel}
	if l.Encrypted() {
		enc, err := age.Encrypt(w, l.enc.Recipients...)
		if err != nil {
			cancel()
			w.Close()
			return nil, fmt.Errorf("encrypting %s: %w", key, err)
		}
		sw.Writer, sw.enc = enc, enc
	}
	return sw, nil
}

// Close finishes the encryption and commits the object.
func (s *SealedWriter) Close() error {
	defer s.cancel()
	if s.enc != nil {
		if err := s.enc.Close(); err != nil {
			s.cancel()
			s.w.Close()
			return err
		}
	}
	return s.w.Close()
}

// Abort discards the object: nothing appears at its key.
func (s *SealedWriter) Abort() {
	s.cancel()
	s.w.Close()
}

// NewOpenedReader opens key, decrypting it when it is age-encrypted. An
// encrypted object without identities gives an error wrapping ErrEncrypted;
// a wrong identity, an error naming the key.
func (l *Location) NewOpenedReader(ctx context.Context, key string) (io.ReadCloser, error) {
	r, err := l.NewReader(ctx, key)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(len(ageHeader))
	if string(head) != ageHeader {
		return struct {
			io.Reader
			io.Closer
		}{br, r}, nil
	}
	if l.enc == nil || len(l.enc.Identities) == 0 {
		r.Close()
		return nil, fmt.Errorf("%s is %w", key, ErrEncrypted)
	}
	dr, err := age.Decrypt(br, l.enc.Identities...)
	if err != nil {
		r.Close()
		var nm *age.NoIdentityMatchError
		if errors.As(err, &nm) {
			return nil, fmt.Errorf("%s: none of the given age identities can decrypt it", key)
		}
		return nil, fmt.Errorf("decrypting %s: %w", key, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{dr, r}, nil
}
