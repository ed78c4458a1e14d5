package sqlite

import (
	"testing"

	"github.com/inboxd/inboxd/db"

	qt "github.com/frankban/quicktest"
)

// A received message says how far its From can be trusted (API-NOTES section 9); sent
// mail says nothing.
func TestSenderAuthentication(t *testing.T) {
	scanned := func(dmarc string) *db.Protection {
		return &db.Protection{Status: db.ProtectionClean, Authentication: db.Authentication{SPF: "pass", DKIM: "pass", DMARC: dmarc}}
	}
	for _, tc := range []struct {
		name string
		m    db.Message
		want string
	}{
		{"DMARC pass", db.Message{Direction: db.Received, Protection: scanned("pass")}, db.SenderAuthenticated},
		{"DMARC fail", db.Message{Direction: db.Received, Protection: scanned("fail")}, db.SenderUnauthenticated},
		{"no DMARC policy", db.Message{Direction: db.Received, Protection: scanned("none")}, db.SenderUnauthenticated},
		{"released forgery", db.Message{Direction: db.Received, Quarantined: false, Protection: &db.Protection{
			Status: db.ProtectionReleased, Authentication: db.Authentication{DMARC: "fail"}, Reasons: []string{"authentication_failed"}}}, db.SenderUnauthenticated},
		{"not scanned", db.Message{Direction: db.Received}, db.SenderUnchecked},
		{"sent", db.Message{Direction: db.Sent, Protection: scanned("pass")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qt.Assert(t, tc.m.SummaryView().SenderAuthentication, qt.Equals, tc.want)
			qt.Assert(t, tc.m.FullView(true, false).SenderAuthentication, qt.Equals, tc.want)
		})
	}
}
