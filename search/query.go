package search

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The query language, web-search style (API-NOTES section 7) plus field operators:
//
//	invoice march        both words (AND)
//	"quarterly report"   the phrase
//	-newsletter          without the word (also -"a phrase", -from:x)
//	invoice OR receipt   either (OR binds tighter than AND; "or" in any case)
//	from:alice           sender name or address (from:alice@example.com, from:example.com)
//	to:bob               a to or cc recipient
//	subject:"weekly report"
//	has:attachment
//	before:2026-01-31    sent before that day (UTC); after:2026-01-01 on that day or later
//
// Matching is case-insensitive with no stemming. Nothing a user types is an error: an
// unclosed quote runs to the end, a lone "-" or a dangling OR is ignored, an operator with
// an empty or malformed value is searched as plain text, and input with no words at all
// matches nothing.

// MaxClauses bounds the clauses of one query; more are ignored.
const MaxClauses = 32

type clauseKind int

const (
	kWords  clauseKind = iota // a word or phrase, in one field or all text fields
	kHas                      // has:attachment
	kBefore                   // before:date
	kAfter                    // after:date
)

// clause is one condition: terms (one term, or a phrase) in a field ("" means every text
// field), or a date or attachment condition.
type clause struct {
	kind  clauseKind
	field string // fSubject, fFrom, fTo or "" (all)
	terms []string
	not   bool
	ms    int64 // the date of before/after, ms since the epoch (UTC midnight)
}

// Query is a parsed query: every group must match, and a group matches when any of its
// clauses does. A clause with not set excludes; a group of one negated clause is an
// exclusion of the whole result.
type Query struct {
	groups [][]clause
}

// Empty reports whether the query has nothing to match on (no words, operators or
// exclusions); it then matches nothing.
func (q Query) Empty() bool { return len(q.groups) == 0 }

// lexeme is one unit of the raw query before grouping.
type lexeme struct {
	text   string
	phrase bool   // quoted
	op     string // "from", "to", "subject", "has", "before", "after" when text is its value
	not    bool
	or     bool // the OR operator
}

var operators = map[string]bool{"from": true, "to": true, "subject": true, "has": true, "before": true, "after": true}

// lex splits the raw query into lexemes.
func lex(s string) []lexeme {
	var out []lexeme
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			i += size
			continue
		}
		not := false
		for i < len(s) && s[i] == '-' {
			not = true
			i++
		}
		if i >= len(s) {
			break
		}
		if r, _ := utf8.DecodeRuneInString(s[i:]); unicode.IsSpace(r) {
			continue // a lone "-"
		}
		if s[i] == '"' {
			text, next := quoted(s, i)
			out = append(out, lexeme{text: text, phrase: true, not: not})
			i = next
			continue
		}
		start := i
		for i < len(s) {
			r, size := utf8.DecodeRuneInString(s[i:])
			if unicode.IsSpace(r) || r == '"' {
				break
			}
			i += size
		}
		word := s[start:i]
		if name, _, ok := strings.Cut(word, ":"); ok && operators[strings.ToLower(name)] && strings.HasSuffix(word, ":") &&
			i < len(s) && s[i] == '"' {
			// An operator with a quoted value: subject:"weekly report".
			text, next := quoted(s, i)
			out = append(out, lexeme{text: text, phrase: true, op: strings.ToLower(name), not: not})
			i = next
			continue
		}
		if name, value, ok := strings.Cut(word, ":"); ok && operators[strings.ToLower(name)] {
			if value == "" {
				continue // "from:" with nothing after it
			}
			out = append(out, lexeme{text: value, op: strings.ToLower(name), not: not})
			continue
		}
		if !not && strings.EqualFold(word, "or") {
			out = append(out, lexeme{or: true})
			continue
		}
		out = append(out, lexeme{text: word, not: not})
	}
	return out
}

// quoted reads a quoted string starting at the quote at s[i]; an unclosed quote runs to
// the end. It returns the text and the index after the closing quote.
func quoted(s string, i int) (string, int) {
	rest := s[i+1:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j], i + 1 + j + 1
	}
	return rest, len(s)
}

// Parse parses a query. It never fails; see the package documentation for what it does
// with malformed input.
func Parse(s string) Query {
	var q Query
	pendingOr := false
	n := 0
	for _, lx := range lex(s) {
		if lx.or {
			pendingOr = len(q.groups) > 0
			continue
		}
		c, ok := toClause(lx)
		if !ok {
			continue
		}
		if n++; n > MaxClauses {
			break
		}
		if pendingOr {
			last := len(q.groups) - 1
			q.groups[last] = append(q.groups[last], c)
		} else {
			q.groups = append(q.groups, []clause{c})
		}
		pendingOr = false
	}
	return q
}

func toClause(lx lexeme) (clause, bool) {
	c := clause{not: lx.not}
	switch lx.op {
	case "has":
		if v := strings.ToLower(lx.text); v == "attachment" || v == "attachments" {
			c.kind = kHas
			return c, true
		}
		return textClause(lx.op+":"+lx.text, lx.not, "", false)
	case "before", "after":
		if t, ok := parseDate(lx.text); ok {
			c.kind, c.ms = kBefore, t.UnixMilli()
			if lx.op == "after" {
				c.kind = kAfter
			}
			return c, true
		}
		return textClause(lx.op+":"+lx.text, lx.not, "", false)
	case "from":
		return textClause(lx.text, lx.not, fFrom, lx.phrase)
	case "to":
		return textClause(lx.text, lx.not, fTo, lx.phrase)
	case "subject":
		return textClause(lx.text, lx.not, fSubject, lx.phrase)
	}
	return textClause(lx.text, lx.not, "", lx.phrase)
}

// textClause makes a word or phrase clause; ok is false when the text has no words.
func textClause(text string, not bool, field string, phrase bool) (clause, bool) {
	var terms []string
	if phrase {
		// A phrase matches its words in order; compounds inside it ("alice@example.com
		// wrote") match as their words, which the index holds at consecutive positions.
		tokenize(text, func(t token) {
			if !t.compound {
				terms = append(terms, t.term)
			}
		})
	} else {
		terms = Terms(text)
	}
	if len(terms) == 0 {
		return clause{}, false
	}
	return clause{kind: kWords, field: field, terms: terms, not: not}, true
}

func parseDate(s string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02", "2006/01/02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// String shows the parsed query, for tests and logs: groups joined by " AND ", clauses of
// a group by " OR ".
func (q Query) String() string {
	var groups []string
	for _, g := range q.groups {
		var cs []string
		for _, c := range g {
			cs = append(cs, c.String())
		}
		groups = append(groups, strings.Join(cs, " OR "))
	}
	return strings.Join(groups, " AND ")
}

func (c clause) String() string {
	var b strings.Builder
	if c.not {
		b.WriteByte('-')
	}
	switch c.kind {
	case kHas:
		b.WriteString("has:attachment")
	case kBefore:
		b.WriteString("before:" + time.UnixMilli(c.ms).UTC().Format("2006-01-02"))
	case kAfter:
		b.WriteString("after:" + time.UnixMilli(c.ms).UTC().Format("2006-01-02"))
	default:
		switch c.field {
		case fFrom:
			b.WriteString("from:")
		case fTo:
			b.WriteString("to:")
		case fSubject:
			b.WriteString("subject:")
		}
		if len(c.terms) == 1 {
			b.WriteString(c.terms[0])
		} else {
			b.WriteString(`"` + strings.Join(c.terms, " ") + `"`)
		}
	}
	return b.String()
}
