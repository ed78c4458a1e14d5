package schema

import (
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

func TestPath(t *testing.T) {
	v := validator(t)
	long254 := strings.Repeat("u", 64) + "@" + strings.Repeat("a.", 93) + "com"
	tests := []struct {
		name, value string
		valid       bool
	}{
		{"inboxId", "alice@example.com", true},
		{"inboxId", "Alice.B+tag@Mail.Example.COM", true},
		{"inboxId", "o'brien@example.ie", true},
		{"inboxId", long254, true},
		{"inboxId", "u" + long254, false},
		{"inboxId", "", false},
		{"inboxId", "alice", false},
		{"inboxId", "alice@example", false},
		{"inboxId", "alice@example.c", false},
		{"inboxId", "alice@example.c0m", false},
		{"inboxId", ".alice@example.com", false},
		{"inboxId", "alice.@example.com", false},
		{"inboxId", "al..ice@example.com", false},
		{"inboxId", "alice@-example.com", false},
		{"inboxId", "alice@example..com", false},
		{"inboxId", "alice@@example.com", false},
		{"inboxId", "alice@example.com\n", false},
		{"inboxId", "alice%40example.com", false},

		{"messageId", "<CAF1234@mail.example.net>", true},
		{"messageId", "x", true},
		{"messageId", strings.Repeat("m", 998), true},
		{"messageId", strings.Repeat("m", 999), false},
		{"messageId", "", false},
		{"messageId", "<a@b>\r\nBcc: x@y.com", false},
		{"messageId", "<a@b>\n", false},
		{"messageId", "<a\x00@b>", false},

		{"threadId", "0b5e9c1e-8a4f-4d2b-9c3e-2f1a6d7e8b90", true},
		{"threadId", "0B5E9C1E-8A4F-4D2B-9C3E-2F1A6D7E8B90", true},
		{"threadId", "7d444840-9dc0-11d1-b245-5ffdce74fad2", true},
		{"threadId", "01890f3e-7b2a-7c3d-8e4f-5a6b7c8d9e0f", true},
		{"threadId", "00000000-0000-0000-0000-000000000000", true},
		{"threadId", "ffffffff-ffff-ffff-ffff-ffffffffffff", true},
		{"threadId", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", true},
		{"threadId", "0b5e9c1e-8a4f-0d2b-9c3e-2f1a6d7e8b90", false}, // version 0
		{"threadId", "0b5e9c1e-8a4f-9d2b-9c3e-2f1a6d7e8b90", false}, // version 9
		{"threadId", "0b5e9c1e-8a4f-4d2b-cc3e-2f1a6d7e8b90", false}, // variant c
		{"threadId", "0b5e9c1e8a4f4d2b9c3e2f1a6d7e8b90", false},
		{"threadId", "{0b5e9c1e-8a4f-4d2b-9c3e-2f1a6d7e8b90}", false},
		{"threadId", "0b5e9c1e-8a4f-4d2b-9c3e-2f1a6d7e8b9", false},
		{"threadId", "0b5e9c1e-8a4f-4d2b-9c3e-2f1a6d7e8b90\n", false},
		{"threadId", "", false},
		{"attachmentId", "7d444840-9dc0-11d1-b245-5ffdce74fad2", true},
		{"attachmentId", "invoice.pdf", false},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.value[:min(len(tt.value), 40)], func(t *testing.T) {
			want := ok
			if !tt.valid {
				want = bad(tt.name)
			}
			assertOutcome(qt.New(t), v.Path(tt.name, tt.value), want)
		})
	}
}

func TestPathMessages(t *testing.T) {
	c := qt.New(t)
	v := validator(t)
	c.Check(v.Path("inboxId", "a..b@example.com"), qt.ErrorMatches, `inboxId: must be an email address of at most 254 characters`)
	c.Check(v.Path("messageId", ""), qt.ErrorMatches, `messageId: must be a Message-ID of 1-998 characters without CR, LF or NUL`)
	c.Check(v.Path("threadId", "x"), qt.ErrorMatches, `threadId: must be a UUID .*`)
}

func TestPathUnknownName(t *testing.T) {
	err := validator(t).Path("groupId", "x")
	qt.Assert(t, err, qt.Not(qt.IsNil))
	var e *Error
	qt.Check(t, err, qt.Not(qt.ErrorAs), &e)
}
