package triage

import (
	"bytes"
	"regexp"
	"strings"
)

// Facts beyond the words: what kind of address sent the message, what its headers say
// about bulk and automated mail, and which lines of its text are the sender's own words
// rather than quoted history, a signature or a footer.

// noReplyLocal are local parts of addresses nobody reads.
var noReplyLocal = []string{"noreply", "no-reply", "no_reply", "donotreply", "do-not-reply", "do_not_reply", "mailer-daemon", "postmaster", "bounce"}

// systemLocal are local parts of addresses systems send from.
var systemLocal = []string{"notification", "notify", "alert", "automated", "system", "monitor", "daemon", "robot", "bot", "updates", "digest",
	"newsletter", "news", "marketing", "mailer", "calendar", "security", "status", "receipts", "statements", "shipping", "orders", "jobs", "builds", "ci"}

// roleLocal are local parts of a team's shared address.
var roleLocal = []string{"support", "help", "billing", "accounts", "invoice", "finance", "sales", "info", "hello", "team", "contact", "office",
	"admin", "service", "care", "hr", "legal", "press", "partners", "payments"}

// senderKind names the kind of the sender's address: noreply, system, role, freemail (a
// person's own mailbox), person (first.last and the like at a company) or other.
func senderKind(local, domain string) string {
	l := strings.ToLower(local)
	switch {
	case containsAny(l, noReplyLocal):
		return "noreply"
	case containsAny(l, systemLocal):
		return "system"
	case containsAny(l, roleLocal):
		return "role"
	case freemail[domain]:
		return "freemail"
	case strings.ContainsAny(l, "._") || len(l) <= 12:
		return "person"
	}
	return "other"
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// bulkMarks are header fields bulk-mail services add to every message they send.
var bulkMarks = []string{"Feedback-Id", "X-Campaign-Id", "X-Mailgun-Sid", "X-Mc-User", "X-Ses-Outgoing", "X-Sg-Eid"}

// autoReplyMarks are header fields of automatic replies.
var autoReplyMarks = []string{"X-Autoreply", "X-Autorespond", "X-Auto-Response-Suppress"}

// headerFacts are the facts the header fields of db.TriageHeaderNames give, fromDomain
// being the sender's domain.
func headerFacts(h map[string]string, fromDomain string) []string {
	var out []string
	has := func(name string) bool { _, ok := h[name]; return ok }
	if has("List-Id") {
		out = append(out, "h:list-id")
	}
	if has("List-Unsubscribe") || has("List-Unsubscribe-Post") {
		out = append(out, "h:unsubscribe")
	}
	if v, ok := h["Auto-Submitted"]; ok && !strings.EqualFold(strings.TrimSpace(v), "no") {
		out = append(out, "h:auto-submitted", "h:auto-submitted:"+firstWord(v))
	}
	if v, ok := h["Precedence"]; ok {
		out = append(out, "h:precedence:"+firstWord(v))
	}
	for _, m := range bulkMarks {
		if has(m) {
			out = append(out, "h:bulk-mark")
			break
		}
	}
	for _, m := range autoReplyMarks {
		if has(m) {
			out = append(out, "h:autoreply-mark")
			break
		}
	}
	if v, ok := h["X-Mailer"]; ok {
		out = append(out, "h:mailer", "h:mailer:"+firstWord(v))
	}
	if has("In-Reply-To") {
		out = append(out, "h:in-reply-to")
	}
	if v, ok := h["Reply-To"]; ok {
		if _, d := splitAddress(v); d != "" && d != fromDomain {
			out = append(out, "h:reply-to:elsewhere")
		} else {
			out = append(out, "h:reply-to")
		}
	}
	if len(out) == 0 {
		out = append(out, "h:no-signal-headers")
	}
	return out
}

// firstWord is the first run of letters, digits and dashes of a header value, lowercased:
// "bulk", "auto-generated", "mailchimp".
func firstWord(v string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	end := strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	})
	if end >= 0 {
		v = v[:end]
	}
	if len(v) > maxTokenBytes {
		v = v[:maxTokenBytes]
	}
	return v
}

// Parts of a message's text.
const (
	partOwn    = iota // what the sender writes now
	partQuoted        // history: "> " lines, and everything after an attribution line
	partFooter        // signature, sent-from lines, legal and unsubscribe footers
)

// attribution matches the line a mail client puts above quoted history, in the languages
// the corpus has: "On Tue, 3 Mar 2026 at 10:14, Ana <ana@x> wrote:", "Am ... schrieb ...:",
// "Le ... a écrit :", "-----Original Message-----".
var attribution = regexp.MustCompile(`(?i)^\s*(on\s.{4,200}\swrote:?|am\s.{4,200}\sschrieb.{0,80}|le\s.{4,200}\sa\sécrit\s?:?|el\s.{4,200}\sescribió:?|` +
	`em\s.{4,200}\sescreveu:?|il\s.{4,200}\sha\sscritto:?|op\s.{4,200}\sschreef.{0,80}|w\sdniu\s.{4,200}\snapisał.{0,80}|` +
	`-{2,}\s*original(e)?\s+(message|nachricht|mensaje|messaggio)\s*-{2,})\s*$`)

// forwardStart matches the line above a forwarded message: what follows is the message
// forwarded, which says what the forwarder wants handled, so it counts as the sender's own.
var forwardStart = regexp.MustCompile(`(?i)^\s*(-{3,}\s*(forwarded message|weitergeleitete nachricht|message transféré|mensaje reenviado|messaggio inoltrato)\s*-{3,}|begin forwarded message:)`)

// outlookHeader matches the first line of the header block Outlook puts above quoted
// history ("From: Ana <ana@x>" then "Sent: ...").
var outlookHeader = regexp.MustCompile(`(?i)^\s*\*?(from|von|de|da|van|od)\s*:\*?\s+\S`)

// outlookNext matches the line after it.
var outlookNext = regexp.MustCompile(`(?i)^\s*\*?(sent|date|gesendet|envoyé|enviado|inviato|verzonden|wysłano|data|datum)\s*:`)

// footerWords mark a line of a signature block or footer that says nothing of this
// message: device sign-offs, confidentiality notices, unsubscribe and preference links.
// (Plain substrings of the lowercased line: a regular expression here cost more than the
// rest of the model.)
var footerWords = []string{"sent from my", "get outlook for", "enviado desde", "gesendet von meinem", "envoyé de mon", "confidential",
	"intended recipient", "privileged", "disclaimer", "unsubscribe", "preferences", "you are receiving this", "you received this",
	"in your browser", "in browser", "no longer wish to receive", "abmelden", "désabonner", "darse de baja", "all rights reserved",
	"registered office", "registered in", "privacy policy"}

// footerStarts lists footerWords by their first byte, and footerPairs marks their first
// two bytes, so that isFooterLine reads a line once instead of once per word (it did: a
// tenth of the model's time), and compares words only where a line's two bytes begin one
// (comparing at every byte that begins one was still a tenth on mail of made-up words).
var (
	footerStarts = wordsByFirstByte(footerWords)
	footerPairs  = firstPairs(footerWords)
)

func wordsByFirstByte(words []string) *[256][]string {
	var by [256][]string
	for _, w := range words {
		by[w[0]] = append(by[w[0]], w)
	}
	return &by
}

// pairSet is a set of two-byte strings, a bit each.
type pairSet [1 << 16 / 64]uint64

func pairOf(a, b byte) int { return int(a)<<8 | int(b) }

func (s *pairSet) has(p int) bool { return s[p>>6]&(1<<(p&63)) != 0 }

// firstPairs returns the set of the first two bytes of words (each at least two long).
func firstPairs(words []string) *pairSet {
	var s pairSet
	for _, w := range words {
		p := pairOf(w[0], w[1])
		s[p>>6] |= 1 << (p & 63)
	}
	return &s
}

// isFooterLine reports whether a line (trimmed) holds one of footerWords.
func isFooterLine(t string, scratch *[]byte) bool {
	low := lowerASCII(t, scratch)
	for i := 0; i+1 < len(low); i++ {
		if !footerPairs.has(pairOf(low[i], low[i+1])) {
			continue
		}
		for _, w := range footerStarts[low[i]] {
			if bytes.HasPrefix(low[i:], []byte(w)) {
				return true
			}
		}
	}
	return false
}

// lowerASCII lowercases the ASCII letters of s into scratch; other bytes are kept, which
// is enough to find footerWords (their non-ASCII letters are lowercase already, and a
// capitalized one is missed rather than mistaken).
func lowerASCII(s string, scratch *[]byte) []byte {
	b := (*scratch)[:0]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	*scratch = b
	return b
}

// mayAttribute is a cheap test a line must pass before the attribution and forward
// expressions are tried: they all end in a colon or hold a run of dashes.
func mayAttribute(t string) bool {
	return len(t) <= 300 && (strings.HasSuffix(t, ":") || strings.Contains(t, "--") || strings.HasPrefix(t, "Begin") || strings.HasPrefix(t, "begin"))
}

// mayBeField is a cheap test for a header-like line ("From: ...", "*Sent:* ..."): a colon
// within its first ten bytes.
func mayBeField(t string) bool {
	i := strings.IndexByte(t, ':')
	return i > 0 && i <= 10
}

// partReader tells, line by line, which part of the message a line is in. Once quoted
// history starts the rest is quoted (replies quote at the bottom far more often than they
// interleave), except "> " lines are quoted wherever they are and a forwarded message's
// header starts own text again.
type partReader struct {
	quoting, footer, pendingOutlook bool
	quoted, forwarded, signature    bool
	scratch                         []byte
}

func (p *partReader) next(line string) int {
	t := strings.TrimSpace(line)
	attr := mayAttribute(t)
	switch {
	case attr && forwardStart.MatchString(t):
		p.quoting, p.footer, p.forwarded = false, false, true
		return partFooter
	case strings.HasPrefix(t, ">"):
		p.quoted = true
		return partQuoted
	case p.quoting:
		return partQuoted
	case attr && attribution.MatchString(t):
		p.quoting, p.quoted = true, true
		return partQuoted
	case p.pendingOutlook && mayBeField(t) && outlookNext.MatchString(t):
		p.quoting, p.quoted, p.pendingOutlook = true, true, false
		return partQuoted
	case !p.forwarded && mayBeField(t) && outlookHeader.MatchString(t):
		p.pendingOutlook = true
		return partOwn
	}
	p.pendingOutlook = false
	switch {
	case t == "--" || t == "-- " || t == "__" || strings.HasPrefix(t, "___"):
		p.footer, p.signature = true, true
		return partFooter
	case p.footer:
		return partFooter
	case isFooterLine(t, &p.scratch):
		p.signature = true
		return partFooter
	}
	return partOwn
}

// facts are what the parts found say about the message's place in a conversation.
func (p *partReader) facts() []string {
	var out []string
	if p.quoted {
		out = append(out, "h:quoted")
	}
	if p.forwarded {
		out = append(out, "h:forwarded")
	}
	if p.signature {
		out = append(out, "h:footer")
	}
	return out
}
