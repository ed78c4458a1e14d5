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

// docTerms is a message with its fields' words, each field read when first asked for.
type docTerms struct {
	d      *Doc
	texts  map[string]string
	fields map[string]fieldTerms
}

func newDocTerms(d *Doc) *docTerms {
	return &docTerms{d: d, texts: fieldTexts(d), fields: map[string]fieldTerms{}}
}

func (dt *docTerms) in(field string) fieldTerms {
	ft, ok := dt.fields[field]
	if !ok {
		ft = termsOf(dt.texts[field])
		dt.fields[field] = ft
	}
	return ft
}

// Matches reports whether a search with the query would find d, evaluated in memory
// exactly as the index evaluates it: what a wait for mail matches arriving messages with,
// one at a time, without the index. An empty query matches nothing, as in a search.
func (q Query) Matches(d *Doc) bool { return !q.Empty() && q.matches(d) }

// matches evaluates the query on a message's text exactly as the index would, positions
// included.
func (q Query) matches(d *Doc) bool {
	_, ok := q.score(newDocTerms(d), nil)
	return ok
}

// score evaluates the query on a message as matches does and scores it as a search
// scores a hit: weights[ci][fi] for each word clause ci (numbered across the groups) and
// each field fi of clauseFields it matches in. With nil weights the score is 0.
func (q Query) score(dt *docTerms, weights [][]float64) (float64, bool) {
	d := dt.d
	score, ok, ci := 0.0, true, 0
	for _, g := range q.groups {
		any := false
		for _, c := range g {
			var m bool
			switch c.kind {
			case kHas:
				m = len(d.Attachments) > 0
			case kBefore:
				m = day(d.TS) < day(c.ms)
			case kAfter:
				m = day(d.TS) >= day(c.ms)
			default:
				// Every field, not the first that matches: each adds to the score.
				for fi, f := range clauseFields(c) {
					if dt.in(f).has(c.terms) {
						m = true
						if weights != nil && weights[ci] != nil {
							score += weights[ci][fi]
						}
					}
				}
			}
			any = any || m != c.not
			ci++
		}
		ok = ok && any
	}
	return score, ok
}

// hasPhrase reports whether text holds terms at consecutive word positions, as the index
// matches a phrase; it is fieldTerms.has for one phrase, without building the map.
func hasPhrase(text string, terms []string) bool {
	n := len(terms)
	win := make([]string, 0, n)
	last, found := -1, false
	tokenizeWhile(text, func(t token) bool {
		if t.compound {
			return true
		}
		if t.pos != last+1 {
			win = win[:0]
		}
		last = t.pos
		if len(win) == n {
			copy(win, win[1:])
			win = win[:n-1]
		}
		win = append(win, t.term)
		if len(win) == n {
			for i := range win {
				if win[i] != terms[i] {
					return true
				}
			}
			found = true
		}
		return !found
	})
	return found
}
