package mail

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/inboxd/inboxd/db"
)

// maxReferencesLen bounds the References header of a reply (API-NOTES 10).
const maxReferencesLen = 2000

// Original is what a reply needs to know about the message it answers.
type Original struct {
	MessageID  string
	Sent       bool // the original was sent by this inbox
	From       string
	To, Cc     []string
	ReplyTo    []string
	Subject    string
	References []string
}

// ReplyRequest carries the caller's choices; a nil list means "not given".
type ReplyRequest struct {
	ReplyAll    bool
	To, Cc, Bcc []string
}

// ReplyPlan is the resolved headers of a reply.
type ReplyPlan struct {
	To, Cc, Bcc []string
	Subject     string
	InReplyTo   string
	References  []string
}

// ErrNoRecipients means the reply rules left nobody to send to; the caller
// reports it as invalid_reply 422.
var ErrNoRecipients = errors.New("reply has no recipients")

// PlanReply applies the reply rules of API-NOTES section 10. own holds the
// inbox's address and aliases; they never receive the inbox's own reply.
func PlanReply(orig Original, own []string, req ReplyRequest) (ReplyPlan, error) {
	exclude := map[string]bool{}
	for _, a := range own {
		exclude[lowerAddr(a)] = true
	}

	defaultTo := orig.ReplyTo
	if len(defaultTo) == 0 {
		defaultTo = []string{orig.From}
	}
	if orig.Sent {
		// Replying to our own message continues the conversation with the
		// people it went to, not with ourselves.
		defaultTo = orig.To
	}
	to := defaultTo
	if req.To != nil {
		to = req.To
	}
	plan := ReplyPlan{
		To:         recipients(to, exclude),
		Subject:    replySubject(orig.Subject),
		InReplyTo:  orig.MessageID,
		References: replyReferences(orig.References, orig.MessageID),
	}

	var cc []string
	switch {
	case req.Cc != nil:
		cc = req.Cc
	case req.To == nil && req.ReplyAll:
		cc = append(append([]string{}, orig.To...), orig.Cc...)
	}
	plan.Cc = recipients(cc, exclude)
	plan.Bcc = recipients(req.Bcc, exclude)

	if len(plan.To)+len(plan.Cc)+len(plan.Bcc) == 0 {
		return ReplyPlan{}, ErrNoRecipients
	}
	return plan, nil
}

// recipients lowercases, drops empties and anything in exclude, and adds
// what it keeps to exclude, so one address lands in one list only (To
// before Cc before Bcc).
func recipients(list []string, exclude map[string]bool) []string {
	out := []string{}
	for _, a := range list {
		a = lowerAddr(a)
		if a == "" || exclude[a] {
			continue
		}
		exclude[a] = true
		out = append(out, a)
	}
	return out
}

func lowerAddr(a string) string {
	if n, ok := NormalizeAddress(a); ok {
		return n
	}
	return strings.ToLower(strings.TrimSpace(a))
}

// replySubject is the original's subject with "Re: " once, cut to the 998 characters a
// sent subject may have (a received one has no limit).
func replySubject(s string) string {
	if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(s)), "re:") {
		s = "Re: " + s
	}
	if utf8.RuneCountInString(s) > maxSubjectChars {
		s = string([]rune(s)[:maxSubjectChars])
	}
	return s
}

// maxSubjectChars is the longest subject send takes (the schema's subject maxLength).
const maxSubjectChars = 998

// replyReferences appends the original's id to its references, keeps the
// last 50 (the ids that thread it, db.ThreadCandidates), then cuts the joined header to its last 2000 characters at a
// token start.
func replyReferences(refs []string, id string) []string {
	if n := len(refs); n > 0 && refs[n-1] == id {
		id = "" // already there; a repeated id would only waste the budget
	}
	var ids []string
	for _, t := range db.ThreadCandidates(refs, id) {
		// A space would split the token once the header is joined.
		if !strings.ContainsAny(t, " \t") {
			ids = append(ids, t)
		}
	}
	joined := strings.Join(ids, " ")
	if len(joined) > maxReferencesLen {
		joined = joined[len(joined)-maxReferencesLen:]
		if i := strings.IndexByte(joined, '<'); i >= 0 {
			joined = joined[i:]
		} else {
			joined = ""
		}
	}
	return strings.Fields(joined)
}
