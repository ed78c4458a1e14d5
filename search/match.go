package search

import "strings"

// fieldTexts returns what each text field of the index holds of d, with the caps of
// API-NOTES section 7: the indexer and the phrase check read the same text.
func fieldTexts(d *Doc) map[string]string {
	body := capString(d.Body, MaxBody)
	if len(d.Attachments) > 0 {
		body += "\n" + strings.Join(d.Attachments, "\n")
	}
	return map[string]string{
		fSubject: capString(d.Subject, MaxSubject),
		fFrom:    capString(d.From, MaxFrom),
		fTo:      joinCapped(d.To, MaxTo),
		fBody:    body,
	}
}

// needsVerify reports whether a clause may match a phrase in the body, which the index
// holds without word positions.
func (q Query) needsVerify() bool {
	for _, g := range q.groups {
		for _, c := range g {
			if c.bodyPhrase() {
				return true
			}
		}
	}
	return false
}

func (c clause) bodyPhrase() bool {
	return c.kind == kWords && c.field == "" && len(c.terms) > 1
}

// fieldTerms holds one field's words with their positions, compounds included.
type fieldTerms map[string][]int

func termsOf(text string) fieldTerms {
	ft := fieldTerms{}
	tokenize(text, func(t token) { ft[t.term] = append(ft[t.term], t.pos) })
	return ft
}

// has reports whether the field holds the terms, as one term or a phrase.
func (ft fieldTerms) has(terms []string) bool {
	first := ft[terms[0]]
	if len(terms) == 1 {
		return len(first) > 0
	}
	rest := make([]map[int]bool, len(terms)-1)
	for i, t := range terms[1:] {
		ps := ft[t]
		if len(ps) == 0 {
			return false
		}
		rest[i] = make(map[int]bool, len(ps))
		for _, p := range ps {
			rest[i][p] = true
		}
	}
next:
	for _, p := range first {
		for i := range rest {
			if !rest[i][p+1+i] {
				continue next
			}
		}
		return true
	}
	return false
}

// matches evaluates the query on a message's text exactly as the index would, positions
// included.
func (q Query) matches(d *Doc) bool {
	texts := fieldTexts(d)
	fields := map[string]fieldTerms{}
	in := func(f string) fieldTerms {
		ft, ok := fields[f]
		if !ok {
			ft = termsOf(texts[f])
			fields[f] = ft
		}
		return ft
	}
	clauseMatches := func(c clause) bool {
		var m bool
		switch c.kind {
		case kHas:
			m = len(d.Attachments) > 0
		case kBefore:
			m = day(d.TS) < day(c.ms)
		case kAfter:
			m = day(d.TS) >= day(c.ms)
		default:
			if c.field != "" {
				m = in(c.field).has(c.terms)
			} else {
				for _, f := range []string{fSubject, fFrom, fTo, fBody} {
					if in(f).has(c.terms) {
						m = true
						break
					}
				}
			}
		}
		return m != c.not
	}
	for _, g := range q.groups {
		any := false
		for _, c := range g {
			if clauseMatches(c) {
				any = true
				break
			}
		}
		if !any {
			return false
		}
	}
	return true
}
