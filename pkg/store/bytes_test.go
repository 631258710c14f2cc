package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"filippo.io/age"
)

func TestSealedBytes(t *testing.T) {
	ctx := context.Background()
	loc, err := Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"images":["registry.example.com/shop/web:1"]}`)
	// Plain.
	sum, err := loc.PutSealedBytes(ctx, "plain.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := loc.GetVerified(ctx, "plain.json", sum); err != nil || string(got) != string(data) {
		t.Fatalf("plain: %q %v", got, err)
	}
	// Encrypted: the bucket holds ciphertext, the SHA-256 is the plaintext's.
	loc.SetEncryption(&Encryption{Recipients: []age.Recipient{id.Recipient()}})
	sealedSum, err := loc.PutSealedBytes(ctx, "sealed.json", data)
	if err != nil || sealedSum != sum {
		t.Fatalf("sealed: %s %v, want the plaintext's SHA-256 %s", sealedSum, err, sum)
	}
	raw, _ := loc.Bucket().ReadAll(ctx, "sealed.json")
	if !strings.HasPrefix(string(raw), ageHeader) || strings.Contains(string(raw), "registry.example.com") {
		t.Fatalf("sealed object is not age ciphertext: %q", raw)
	}
	if _, err := loc.GetVerified(ctx, "sealed.json", sum); !errors.Is(err, ErrEncrypted) {
		t.Errorf("without identity: %v, want ErrEncrypted", err)
	}
	loc.SetEncryption(&Encryption{Identities: []age.Identity{id}})
	if got, err := loc.GetVerified(ctx, "sealed.json", sum); err != nil || string(got) != string(data) {
		t.Errorf("with identity: %q %v", got, err)
	}
	// Damaged: the pinned SHA-256 does not match.
	if err := loc.Bucket().WriteAll(ctx, "plain.json", append(data, ' '), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := loc.GetVerified(ctx, "plain.json", sum); err == nil || !strings.Contains(err.Error(), "plain.json is damaged") {
		t.Errorf("damaged: %v", err)
	}
	if _, err := loc.GetVerified(ctx, "missing.json", sum); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v, want ErrNotFound", err)
	}
}
