package mail

import (
	"fmt"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

func TestPlanReply(t *testing.T) {
	own := []string{"me@inbox.test", "alias@inbox.test"}
	received := Original{
		MessageID:  "<orig@x.test>",
		From:       "alice@x.test",
		To:         []string{"me@inbox.test", "bob@x.test"},
		Cc:         []string{"carol@x.test", "ALIAS@inbox.test"},
		Subject:    "Plans",
		References: []string{"<root@x.test>"},
	}
	withReplyTo := received
	withReplyTo.ReplyTo = []string{"list@x.test"}
	sent := Original{
		MessageID: "<sent@inbox.test>",
		Sent:      true,
		From:      "me@inbox.test",
		To:        []string{"dan@x.test", "me@inbox.test"},
		Cc:        []string{"erin@x.test"},
		Subject:   "RE: status",
	}

	tests := []struct {
		name string
		orig Original
		req  ReplyRequest
		want ReplyPlan
	}{{
		name: "default to is from",
		orig: received,
		want: ReplyPlan{To: []string{"alice@x.test"}, Cc: []string{}, Bcc: []string{},
			Subject: "Re: Plans", InReplyTo: "<orig@x.test>", References: []string{"<root@x.test>", "<orig@x.test>"}},
	}, {
		name: "default to is reply-to when present",
		orig: withReplyTo,
		want: ReplyPlan{To: []string{"list@x.test"}, Cc: []string{}, Bcc: []string{},
			Subject: "Re: Plans", InReplyTo: "<orig@x.test>", References: []string{"<root@x.test>", "<orig@x.test>"}},
	}, {
		name: "reply to a sent message goes to its recipients, not to us",
		orig: sent,
		want: ReplyPlan{To: []string{"dan@x.test"}, Cc: []string{}, Bcc: []string{},
			Subject: "RE: status", InReplyTo: "<sent@inbox.test>", References: []string{"<sent@inbox.test>"}},
	}, {
		name: "reply all copies to and cc minus own and minus to",
		orig: received,
		req:  ReplyRequest{ReplyAll: true},
		want: ReplyPlan{To: []string{"alice@x.test"}, Cc: []string{"bob@x.test", "carol@x.test"}, Bcc: []string{},
			Subject: "Re: Plans", InReplyTo: "<orig@x.test>", References: []string{"<root@x.test>", "<orig@x.test>"}},
	}, {
		name: "reply all to a sent message",
		orig: sent,
		req:  ReplyRequest{ReplyAll: true},
		want: ReplyPlan{To: []string{"dan@x.test"}, Cc: []string{"erin@x.test"}, Bcc: []string{},
			Subject: "RE: status", InReplyTo: "<sent@inbox.test>", References: []string{"<sent@inbox.test>"}},
	}, {
		name: "explicit to clears the reply-all cc",
		orig: received,
		req:  ReplyRequest{ReplyAll: true, To: []string{"Zed@X.test"}},
		want: ReplyPlan{To: []string{"zed@x.test"}, Cc: []string{}, Bcc: []string{},
			Subject: "Re: Plans", InReplyTo: "<orig@x.test>", References: []string{"<root@x.test>", "<orig@x.test>"}},
	}, {
		name: "explicit lists override, own and duplicates removed",
		orig: received,
		req: ReplyRequest{
			To:  []string{"zed@x.test", "ZED@x.test", "me@inbox.test"},
			Cc:  []string{"yan@x.test", "zed@x.test", "Alias@Inbox.test"},
			Bcc: []string{"audit@x.test", "yan@x.test", "me@inbox.test"},
		},
		want: ReplyPlan{To: []string{"zed@x.test"}, Cc: []string{"yan@x.test"}, Bcc: []string{"audit@x.test"},
			Subject: "Re: Plans", InReplyTo: "<orig@x.test>", References: []string{"<root@x.test>", "<orig@x.test>"}},
	}, {
		name: "explicit cc with default to",
		orig: received,
		req:  ReplyRequest{Cc: []string{"yan@x.test", "alice@x.test"}},
		want: ReplyPlan{To: []string{"alice@x.test"}, Cc: []string{"yan@x.test"}, Bcc: []string{},
			Subject: "Re: Plans", InReplyTo: "<orig@x.test>", References: []string{"<root@x.test>", "<orig@x.test>"}},
	}}
	for _, test := range tests {
		qt.New(t).Run(test.name, func(c *qt.C) {
			got, err := PlanReply(test.orig, own, test.req)
			c.Assert(err, qt.IsNil)
			c.Check(got, qt.DeepEquals, test.want)
		})
	}
}

func TestPlanReplyNoRecipients(t *testing.T) {
	c := qt.New(t)
	own := []string{"me@inbox.test"}
	// A message we sent only to ourselves leaves nobody to answer.
	_, err := PlanReply(Original{MessageID: "<s@inbox.test>", Sent: true, From: "me@inbox.test", To: []string{"ME@inbox.test"}}, own, ReplyRequest{})
	c.Check(err, qt.Equals, ErrNoRecipients)

	_, err = PlanReply(Original{MessageID: "<r@x.test>", From: "a@x.test"}, own, ReplyRequest{To: []string{}})
	c.Check(err, qt.Equals, ErrNoRecipients)

	_, err = PlanReply(Original{MessageID: "<r@x.test>"}, own, ReplyRequest{})
	c.Check(err, qt.Equals, ErrNoRecipients)
}

func TestReplySubject(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Plans", "Re: Plans"},
		{"Re: Plans", "Re: Plans"},
		{"RE: x", "RE: x"},
		{"re:x", "re:x"},
		{"Reply needed", "Re: Reply needed"},
		{"Fwd: x", "Re: Fwd: x"},
		{"", "Re: "},
		// A received subject has no limit; a sent one has 998 characters.
		{strings.Repeat("ü", 2000), "Re: " + strings.Repeat("ü", 994)},
		{"Re: " + strings.Repeat("x", 2000), "Re: " + strings.Repeat("x", 994)},
	}
	c := qt.New(t)
	for _, test := range tests {
		plan, err := PlanReply(Original{MessageID: "<o@x.test>", From: "a@x.test", Subject: test.in}, nil, ReplyRequest{})
		c.Assert(err, qt.IsNil)
		c.Check(plan.Subject, qt.Equals, test.want, qt.Commentf("%q", test.in))
	}
}

func TestReplyReferences(t *testing.T) {
	c := qt.New(t)

	c.Run("last 50 ids", func(c *qt.C) {
		refs := make([]string, 60)
		for i := range refs {
			refs[i] = fmt.Sprintf("<r%d@x.test>", i)
		}
		plan, err := PlanReply(Original{MessageID: "<o@x.test>", From: "a@x.test", References: refs}, nil, ReplyRequest{})
		c.Assert(err, qt.IsNil)
		c.Check(plan.References, qt.HasLen, 50)
		c.Check(plan.References[0], qt.Equals, "<r11@x.test>")
		c.Check(plan.References[49], qt.Equals, "<o@x.test>")
	})

	c.Run("joined header at most 2000 chars, starting at a token", func(c *qt.C) {
		refs := make([]string, 40)
		for i := range refs {
			// 60-char ids: 40 of them joined are far over 2000 chars.
			refs[i] = fmt.Sprintf("<%02d-%s@x.test>", i, strings.Repeat("r", 48))
		}
		plan, err := PlanReply(Original{MessageID: "<o@x.test>", From: "a@x.test", References: refs}, nil, ReplyRequest{})
		c.Assert(err, qt.IsNil)
		joined := strings.Join(plan.References, " ")
		c.Check(len(joined) <= 2000, qt.IsTrue, qt.Commentf("%d", len(joined)))
		c.Check(len(joined) > 2000-62, qt.IsTrue, qt.Commentf("%d", len(joined)))
		c.Check(plan.References[len(plan.References)-1], qt.Equals, "<o@x.test>")
		for _, r := range plan.References {
			c.Check(r, qt.Matches, `<[^<> ]+>`)
		}
		// The cut drops whole ids from the front only.
		all := append(append([]string{}, refs...), "<o@x.test>")
		c.Check(plan.References, qt.DeepEquals, all[len(all)-len(plan.References):])
	})

	c.Run("original id not repeated", func(c *qt.C) {
		plan, err := PlanReply(Original{MessageID: "<o@x.test>", From: "a@x.test", References: []string{"<a@x.test>", "<o@x.test>"}}, nil, ReplyRequest{})
		c.Assert(err, qt.IsNil)
		c.Check(plan.References, qt.DeepEquals, []string{"<a@x.test>", "<o@x.test>"})
	})
}
