package sqlite_test

import (
	"context"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// A mailbox key created to replace the inbox's key revokes the old one; fixtures, which
// do not replace, keep every key they name.
func TestMailboxKeyReplacement(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	key := func(replace bool) string {
		tok := db.GenerateMailboxToken(in.UUID)
		qt.Assert(t, db.CreateKey(ctx, s, db.NewKey{AccountID: "a", Token: tok, InboxAddress: in.Address, Replace: replace}), qt.IsNil)
		return tok
	}
	works := func(tok string) bool {
		_, err := s.Authenticate(ctx, tok)
		return err == nil
	}
	first, second := key(false), key(false)
	qt.Assert(t, works(first) && works(second), qt.IsTrue)
	third := key(true)
	qt.Assert(t, works(third), qt.IsTrue)
	qt.Assert(t, works(first), qt.IsFalse)
	qt.Assert(t, works(second), qt.IsFalse)
}

// The 21st active account key is refused with key_limit (API-NOTES section 1).
func TestAccountKeyLimit(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	setup(t, s)
	for range db.MaxActiveKeys {
		qt.Assert(t, db.CreateKey(ctx, s, db.NewKey{AccountID: "a", Token: db.GenerateAccountToken(), Scopes: []string{"inboxes:read"}}), qt.IsNil)
	}
	err := db.CreateKey(ctx, s, db.NewKey{AccountID: "a", Token: db.GenerateAccountToken(), Scopes: []string{"inboxes:read"}})
	qt.Assert(t, db.IsCode(err, db.ECodeKeyLimit), qt.IsTrue, qt.Commentf("%v", err))
}
