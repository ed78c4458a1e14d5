package db

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Threading (API-NOTES sections 5 and 10) has its home here: which Message-IDs of a
// message's headers name its thread (ThreadCandidates), which of them wins (chooseThread,
// deliver.go), and the shape an id must have to be threaded on at all (ValidMessageID).
// mail parses the headers and composes a reply's References from the same candidates.

const (
	// MaxThreadIDs is how many Message-IDs threading looks at and a reply's References keep.
	MaxThreadIDs = 50
	// MaxMessageIDLen is the RFC 5322 line limit, which also bounds messageId paths.
	MaxMessageIDLen = 998
)

// messageIDToken matches a <...> token without white space in it, so no token carries a
// line break into the References of a reply. A compiled pattern is never changed.
var messageIDToken = regexp.MustCompile(`<[^<>\s]+>`)

// MessageIDTokens returns the <...> tokens of a header value, in order.
func MessageIDTokens(v string) []string {
	return append([]string{}, messageIDToken.FindAllString(v, -1)...)
}

// ValidMessageID is the shape a Message-ID must have to be stored, threaded on or used in
// an API path.
func ValidMessageID(id string) bool {
	if len(id) < 3 || len(id) > MaxMessageIDLen || id[0] != '<' || id[len(id)-1] != '>' ||
		strings.ContainsAny(id[1:len(id)-1], "<>") || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// ThreadCandidates returns the Message-IDs that name the thread of a message with these
// References and In-Reply-To headers: References then In-Reply-To, only well-formed <...>
// tokens, the last MaxThreadIDs in order. The message joins the thread of the one
// appearing latest that its inbox holds (chooseThread).
func ThreadCandidates(references []string, inReplyTo string) []string {
	ids := []string{}
	add := func(v string) {
		for _, t := range messageIDToken.FindAllString(v, -1) {
			if ValidMessageID(t) {
				ids = append(ids, t)
			}
		}
	}
	for _, r := range references {
		add(r)
	}
	add(inReplyTo)
	if len(ids) > MaxThreadIDs {
		ids = ids[len(ids)-MaxThreadIDs:]
	}
	return ids
}
