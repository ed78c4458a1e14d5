package db_test

import (
	"testing"

	"github.com/inboxd/inboxd/db"
)

func TestSignerVerifiesOnlyWhatItSigned(t *testing.T) {
	s := db.NewSigner([]byte("server secret"), 16)
	mac := s.Sign([]byte("domain"), []byte("payload"))
	if len(mac) != 16 {
		t.Fatalf("the MAC has %d bytes, want 16", len(mac))
	}
	if !s.Verify(mac, []byte("domain"), []byte("payload")) {
		t.Fatal("a MAC the signer made does not verify")
	}
	for name, ok := range map[string]bool{
		"altered payload": s.Verify(mac, []byte("domain"), []byte("payload!")),
		"other domain":    s.Verify(mac, []byte("other"), []byte("payload")),
		"cut MAC":         s.Verify(mac[:8], []byte("domain"), []byte("payload")),
		"other key":       db.NewSigner([]byte("another secret"), 16).Verify(mac, []byte("domain"), []byte("payload")),
	} {
		if ok {
			t.Errorf("%s: verified", name)
		}
	}
}
