package db

import (
	"testing"

	qt "github.com/frankban/quicktest"
)

// A received message says how far its From can be trusted (API-NOTES section 9); sent
// mail says nothing.
func TestSenderAuthentication(t *testing.T) {
	scanned := func(dmarc string) *Protection {
		return &Protection{Status: ProtectionClean, Authentication: Authentication{SPF: "pass", DKIM: "pass", DMARC: dmarc}}
	}
	for _, tc := range []struct {
		name string
		m    Message
		want string
	}{
		{"DMARC pass", Message{Direction: Received, Protection: scanned("pass")}, SenderAuthenticated},
		{"DMARC fail", Message{Direction: Received, Protection: scanned("fail")}, SenderUnauthenticated},
		{"no DMARC policy", Message{Direction: Received, Protection: scanned("none")}, SenderUnauthenticated},
		{"released forgery", Message{Direction: Received, Quarantined: false, Protection: &Protection{
			Status: ProtectionReleased, Authentication: Authentication{DMARC: "fail"}, Reasons: []string{"authentication_failed"}}}, SenderUnauthenticated},
		{"not scanned", Message{Direction: Received}, SenderUnchecked},
		{"sent", Message{Direction: Sent, Protection: scanned("pass")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qt.Assert(t, tc.m.SummaryView().SenderAuthentication, qt.Equals, tc.want)
			qt.Assert(t, tc.m.FullView(true, false).SenderAuthentication, qt.Equals, tc.want)
		})
	}
}
