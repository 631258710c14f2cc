package store

import (
	"errors"
	"testing"

	"filippo.io/age"
)

// TestNewEncryption: the table of what each front end gets from its
// recipients and identities.
func TestNewEncryption(t *testing.T) {
	mine, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	ids := []age.Identity{mine}
	pq, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		recipients []string
		ids        []age.Identity
		want       []string // the recipients written for; nil: no encryption
		err        error
		anyErr     bool
	}{
		{name: "neither"},
		{name: "recipients only", recipients: []string{other.Recipient().String()}, want: []string{other.Recipient().String()}},
		{name: "identity only writes for its own key", ids: ids, want: []string{mine.Recipient().String()}},
		{name: "both, matching", recipients: []string{other.Recipient().String(), mine.Recipient().String()}, ids: ids,
			want: []string{other.Recipient().String(), mine.Recipient().String()}},
		{name: "both, no match", recipients: []string{other.Recipient().String()}, ids: ids, err: ErrNoMatchingIdentity},
		{name: "not a key", recipients: []string{"age1nope"}, anyErr: true},
		{name: "post-quantum identity alone writes for its own key", ids: []age.Identity{pq}, want: []string{pq.Recipient().String()}},
		{name: "post-quantum, matching", recipients: []string{pq.Recipient().String()}, ids: []age.Identity{pq}, want: []string{pq.Recipient().String()}},
	}
	for _, tc := range cases {
		enc, err := NewEncryption(tc.recipients, tc.ids)
		switch {
		case tc.err != nil || tc.anyErr:
			if err == nil || (tc.err != nil && !errors.Is(err, tc.err)) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
			continue
		case tc.want == nil:
			if enc != nil {
				t.Errorf("%s: %+v, want no encryption", tc.name, enc)
			}
			continue
		}
		var got []string
		for _, r := range enc.Recipients {
			got = append(got, key(r))
		}
		if len(got) != len(tc.want) || got[0] != tc.want[0] || len(enc.Identities) != len(tc.ids) {
			t.Errorf("%s: recipients %v, %d identities; want %v, %d", tc.name, got, len(enc.Identities), tc.want, len(tc.ids))
		}
	}
}
