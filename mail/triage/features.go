package triage

import (
	"math"
	"math/bits"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Features of a message, in groups: the words of the body's own text (unigrams and
// bigrams), the character n-grams of its words and of the subject's (they carry over to
// inflections, typos and related languages: "invoice", "invoiced", "factura"), the words of
// the subject, the words of quoted history and of signatures and footers (kept apart:
// they say what the thread or the sender's organisation is about, not what this message
// asks), and facts about the sender, headers, thread position, subject and body shape.
// Each word group is valued 1+ln(count), scaled to unit length over the features the model
// knows and weighted by groupWeight, so a long newsletter and a one-line note weigh the
// same; each fact is headerValue.
const (
	groupBody = iota
	groupChars
	groupSubject
	groupQuoted
	groupFooter
	groupHeader
	groupIntent
	numGroups
)

// groupWeight scales each word group after it is normalized: quoted history and footers
// count for less than what the message itself says.
var groupWeight = [numGroups]float32{groupBody: 1, groupChars: 2, groupSubject: 1, groupQuoted: 0.5, groupFooter: 0.5}

// headerValue is the value of a header fact. Below the value of a word, it makes the model
// need more evidence (and, under the L2 penalty, pay more) to lean on facts like "has no
// question mark" instead of on what the message says.
const headerValue = 0.35

// factValue is the value of a fact of each group of facts: header facts at headerValue,
// the phrase families of intent.go at intentValue.
var factValue = [numGroups]float32{groupHeader: headerValue, groupIntent: intentValue}

// isFact reports whether group g holds facts (each at its factValue) rather than counted
// words.
func isFact(g int) bool { return g == groupHeader || g == groupIntent }

// Character n-grams: of each word of at least minGramWord letters, padded with ^ and $,
// those of gramMin to gramMax characters.
const (
	gramMin     = 3
	gramMax     = 5
	minGramWord = 3
)

// maxTokenBytes drops tokens longer than a word (hashes, base64) into one bucket.
const maxTokenBytes = 30

// freemail domains mark mail from a person's own address.
var freemail = map[string]bool{
	"gmail.com": true, "googlemail.com": true, "outlook.com": true, "hotmail.com": true, "hotmail.co.uk": true, "live.com": true,
	"yahoo.com": true, "yahoo.co.uk": true, "icloud.com": true, "me.com": true, "proton.me": true, "protonmail.com": true,
	"fastmail.com": true, "gmx.net": true, "gmx.de": true, "web.de": true, "orange.fr": true, "aol.com": true, "mail.ru": true,
	"yandex.ru": true, "zoho.com": true, "hey.com": true, "t-online.de": true, "free.fr": true, "libero.it": true,
}

// sparse is a feature vector: parallel slices of feature index and value.
type sparse struct {
	idx []int32
	val []float32
}

// vectorizer turns inputs into sparse vectors over a vocabulary. It keeps its scratch
// space between calls, so one vectorizer must not be used by two goroutines at once.
type vectorizer struct {
	lookup func(key []byte) (int32, bool)
	// lookupWord, when set, finds a word feature ("w:" and the word) with its character
	// n-gram features, so a word the model knows costs no n-gram lookups (Model.lookupWord).
	lookupWord func(key []byte) (feature int32, grams []int32, known, gramsKnown bool)
	// seen, when set, remembers those of other words between messages (gramCache).
	seen *gramCache
	key  []byte
	tok  []byte
	// scanned holds the token scan is reading (a token is at most maxTokenBytes and one
	// more rune).
	scanned [maxTokenBytes + utf8.UTFMax]byte
	prev    []byte
	hits    []int32 // gramsOf's result

	// cnt counts each feature of the message being featurized, indexed by feature;
	// touched lists, per group, the features counted (so resetting costs what was used).
	cnt     []float32
	touched [numGroups][]int32
	tokens  int
	marks   []uint64 // inOrder's bitmap over features
	shape   shapeReader
	intent  intentReader
	parts   partReader
	// rel is who writes to whom (the sender's address kind > the first recipient's, or
	// "none"), toKind the recipient's kind; header sets them for the body's facts.
	rel, toKind string
}

func newVectorizer(lookup func(key []byte) (int32, bool)) *vectorizer {
	return &vectorizer{lookup: lookup}
}

func (v *vectorizer) add(group int, i int32) {
	if int(i) >= len(v.cnt) {
		n := max(int(i)+1, 2*len(v.cnt))
		v.cnt = append(v.cnt, make([]float32, n-len(v.cnt))...)
	}
	if v.cnt[i] == 0 {
		v.touched[group] = append(v.touched[group], i)
	}
	v.cnt[i]++
}

// emit counts the feature prefix+parts (joined by spaces) in group if the vocabulary has
// it, and returns its index.
func (v *vectorizer) emit(group int, prefix string, parts ...[]byte) (int32, bool) {
	v.key = append(v.key[:0], prefix...)
	for i, p := range parts {
		if i > 0 {
			v.key = append(v.key, ' ')
		}
		v.key = append(v.key, p...)
	}
	return v.emitKey(group)
}

func (v *vectorizer) emitKey(group int) (int32, bool) {
	i, ok := v.lookup(v.key)
	if ok {
		v.add(group, i)
	}
	return i, ok
}

func (v *vectorizer) emitS(group int, key string) {
	v.key = append(v.key[:0], key...)
	v.emitKey(group)
}

// vector featurizes in into out (reused) and returns the number of word tokens read.
// Each group comes out in feature order, so every sum over it runs in one order and the
// result is the same on every run.
func (v *vectorizer) vector(in Input, out *sparse) int {
	v.tokens = 0
	v.header(in)
	v.subject(in.Subject)
	v.shape = shapeReader{}
	v.intent.reset()
	v.body(in.Text)
	out.idx, out.val = out.idx[:0], out.val[:0]
	for g := range v.touched {
		idx := v.inOrder(v.touched[g])
		start := len(out.idx)
		norm := 0.0
		for _, i := range idx {
			x := factValue[g]
			if !isFact(g) {
				x = countValue(v.cnt[i])
			}
			v.cnt[i] = 0
			out.idx = append(out.idx, i)
			out.val = append(out.val, x)
			norm += float64(x) * float64(x)
		}
		v.touched[g] = idx[:0]
		if !isFact(g) && norm > 0 {
			s := groupWeight[g] / float32(math.Sqrt(norm))
			for k := start; k < len(out.val); k++ {
				out.val[k] *= s
			}
		}
	}
	return v.tokens
}

// countValue is the value of a word counted n times in its group: 1+ln(n).
func countValue(n float32) float32 {
	if int(n) < len(smallCountValues) {
		return smallCountValues[int(n)]
	}
	return float32(1 + math.Log(float64(n)))
}

// smallCountValues holds countValue of the counts most words have, worked out once (a
// logarithm per feature was 3% of the model's time).
var smallCountValues = func() (v [32]float32) {
	for n := range v {
		v[n] = float32(1 + math.Log(float64(n)))
	}
	return v
}()

// inOrder sorts distinct feature indices in place: through a bitmap over the features,
// which costs a pass over the indices and over the bitmap's words between the least and the
// greatest, against the comparisons of a sort (a message has a thousand n-gram features or
// more; sorting them was a quarter of the model's time).
func (v *vectorizer) inOrder(idx []int32) []int32 {
	if len(idx) < 2 {
		return idx
	}
	lo, hi := idx[0], idx[0]
	for _, i := range idx {
		lo, hi = min(lo, i), max(hi, i)
	}
	if need := int(hi)/64 + 1; len(v.marks) < need {
		v.marks = append(v.marks, make([]uint64, need-len(v.marks))...)
	}
	for _, i := range idx {
		v.marks[i/64] |= 1 << (i % 64)
	}
	out := idx[:0]
	for w := lo / 64; w <= hi/64; w++ {
		for m := v.marks[w]; m != 0; m &= m - 1 {
			out = append(out, w*64+int32(bits.TrailingZeros64(m)))
		}
		v.marks[w] = 0
	}
	return out
}

// subject emits the words of the subject and their character n-grams, its reply and
// forward prefixes left out (they are header facts).
func (v *vectorizer) subject(s string) {
	v.scan(s, func(t []byte, word bool) {
		v.tokens++
		v.emit(groupSubject, "s:", t)
		if word {
			v.grams(t)
		}
	})
}

// body emits the words of the text by the part of the message they are in (part), and
// facts about its shape.
func (v *vectorizer) body(text string) {
	v.prev = v.prev[:0]
	parts := &v.parts
	*parts = partReader{scratch: parts.scratch[:0]}
	questions, exclaims, urls, ownLines := 0, 0, 0, 0
	for len(text) > 0 {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		switch parts.next(line) {
		case partOwn:
			ownLines++
			questions += strings.Count(line, "?")
			exclaims += strings.Count(line, "!")
			urls += strings.Count(line, "://")
			v.shape.line(line)
			v.scan(line, v.ownToken)
			v.intent.endLine()
			v.prev = v.prev[:0] // no bigram across lines
		case partQuoted:
			v.scan(line, func(t []byte, _ bool) { v.emit(groupQuoted, "q:", t) })
		case partFooter:
			v.scan(line, func(t []byte, _ bool) { v.emit(groupFooter, "f:", t) })
		}
	}
	v.emitS(groupHeader, "h:q:"+bucket(questions, 0, 1, 2))
	if exclaims > 0 {
		v.emitS(groupHeader, "h:excl")
	}
	if urls > 0 {
		v.emitS(groupHeader, "h:url:"+bucket(urls, 1, 3, 8))
	}
	for _, f := range parts.facts() {
		v.emitS(groupHeader, f)
	}
	v.emitS(groupHeader, "h:lines:"+bucket(ownLines, 0, 2, 5, 15, 40))
	v.shape.facts(v.emitHeader)
	v.intent.facts(v.rel, v.toKind, v.shape.closingQuestionLine(), func(key string) { v.emitS(groupIntent, key) })
}

func (v *vectorizer) emitHeader(key string) { v.emitS(groupHeader, key) }

// ownToken emits a word of the message's own text: the word, the bigram it ends, and its
// character n-grams.
func (v *vectorizer) ownToken(t []byte, word bool) {
	v.tokens++
	v.shape.word(t)
	v.intent.word(t)
	known, grams, gramsKnown := v.emitWord(t)
	// A bigram in the vocabulary has both its words there too (both occur wherever it
	// does), so a word the model does not know ends the chain. Vocabulary building knows
	// every word, so it sees every bigram.
	if known && len(v.prev) > 0 {
		v.emit(groupBody, "b:", v.prev, t)
	}
	v.prev = v.prev[:0]
	if known {
		v.prev = append(v.prev, t...)
	}
	if !word {
		return
	}
	if gramsKnown {
		v.addAll(groupChars, grams)
		return
	}
	v.grams(t)
}

// emitWord counts the word feature of t if the vocabulary has it, and returns with it
// the word's n-gram features when the model keeps them.
func (v *vectorizer) emitWord(t []byte) (known bool, grams []int32, gramsKnown bool) {
	if v.lookupWord == nil {
		_, known = v.emit(groupBody, "w:", t)
		return known, nil, false
	}
	v.key = append(append(v.key[:0], "w:"...), t...)
	feature, grams, known, gramsKnown := v.lookupWord(v.key)
	if known {
		v.add(groupBody, feature)
	}
	return known, grams, gramsKnown
}

// grams emits the character n-grams of a word (lowercased letters), padded with ^ and $:
// those the vocabulary has, from the cache of words seen before when it has the word.
func (v *vectorizer) grams(t []byte) {
	if g, ok := v.seen.get(t); ok {
		v.addAll(groupChars, g)
		return
	}
	g := v.gramsOf(t)
	v.seen.put(t, g)
	v.addAll(groupChars, g)
}

func (v *vectorizer) addAll(group int, features []int32) {
	for _, i := range features {
		v.add(group, i)
	}
}

// gramsOf returns the features of the character n-grams of a word that the vocabulary
// has, in the order of its n-grams (repeats repeated), in scratch space that the next call
// reuses.
func (v *vectorizer) gramsOf(t []byte) []int32 {
	v.hits = v.hits[:0]
	if utf8.RuneCount(t) < minGramWord {
		return v.hits
	}
	var pos [maxTokenBytes + 3]int // rune starts of ^word$
	w := v.tok[:0]
	w = append(w, '^')
	w = append(w, t...)
	w = append(w, '$')
	n := 0
	for i := range string(w) {
		pos[n] = i
		n++
	}
	pos[n] = len(w)
	for size := gramMin; size <= gramMax; size++ {
		for a := 0; a+size <= n; a++ {
			v.key = append(append(v.key[:0], "c:"...), w[pos[a]:pos[a+size]]...)
			if i, ok := v.lookup(v.key); ok {
				v.hits = append(v.hits, i)
			}
		}
	}
	v.tok = w[:0]
	return v.hits
}

// scan tokenizes one line into lowercased runs of letters and digits and calls emit on
// each: numbers become <num>, mixed letters and digits <id> (invoice and ticket numbers),
// a currency sign <money>, a run longer than a word <long>; word says the token is a word
// of letters (worth its character n-grams).
func (v *vectorizer) scan(line string, emit func(t []byte, word bool)) {
	tok := v.scanned[:0]
	digits, letters, long := false, false, false
	flush := func() {
		t, word := tok, false
		switch {
		case len(tok) == 0 && !long:
			return
		case long:
			t = append(tok[:0], "<long>"...)
		case digits && !letters:
			t = append(tok[:0], "<num>"...)
		case digits:
			t = append(tok[:0], "<id>"...)
		case utf8.RuneCount(tok) < 2:
			t = nil
		default:
			word = true
		}
		if t != nil {
			emit(t, word)
		}
		tok = v.scanned[:0]
		digits, letters, long = false, false, false
	}
	money := func() {
		flush()
		emit(append(v.scanned[:0], "<money>"...), false)
	}
	for i := 0; i < len(line); {
		// ASCII, most of mail, by its byte: the same tokens as the Unicode cases below
		// (its letters are a-z and A-Z, its digits 0-9), without decoding and table lookups.
		if c := line[i]; c < utf8.RuneSelf {
			i++
			switch {
			case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
				tok = appendASCII(tok, c|0x20, &long)
				letters = true
			case '0' <= c && c <= '9':
				tok = appendASCII(tok, c, &long)
				digits = true
			case c == '\'' && letters && !digits:
				tok = appendASCII(tok, c, &long)
			case c == '$':
				money()
			default:
				flush()
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(line[i:])
		i += size
		switch {
		case unicode.IsLetter(r):
			tok = v.appendRune(tok, unicode.ToLower(r), &long)
			letters = true
		case unicode.IsDigit(r):
			tok = v.appendRune(tok, r, &long)
			digits = true
		case r == '’' && letters && !digits:
			// keep contractions whole: don't, can't, I'm
			tok = v.appendRune(tok, '\'', &long)
		case r == '€' || r == '£' || r == '¥':
			money()
		default:
			flush()
		}
	}
	flush()
}

// appendASCII is appendRune for an ASCII byte.
func appendASCII(tok []byte, c byte, long *bool) []byte {
	if *long || len(tok) >= maxTokenBytes {
		*long = true
		return tok[:0]
	}
	return append(tok, c)
}

// appendRune adds r to a token unless that makes it longer than a word (hashes, base64),
// which marks it long instead.
func (v *vectorizer) appendRune(tok []byte, r rune, long *bool) []byte {
	if *long || len(tok)+utf8.RuneLen(r) > maxTokenBytes {
		*long = true
		return tok[:0]
	}
	return utf8.AppendRune(tok, r)
}

// header emits the facts about sender, recipients, headers, thread position, subject and
// time.
func (v *vectorizer) header(in Input) {
	local, domain := splitAddress(in.From)
	v.emitS(groupHeader, "h:from:"+shape(local))
	v.emitS(groupHeader, "h:sender:"+senderKind(local, domain))
	switch {
	case domain == "":
	case freemail[domain]:
		v.emitS(groupHeader, "h:freemail")
	default:
		if labels := strings.Split(domain, "."); len(labels) > 2 {
			v.emitS(groupHeader, "h:fromsub:"+shape(labels[0]))
		}
	}
	v.emitS(groupHeader, "h:rcpt:"+bucket(len(in.To), 1, 2, 3, 6))
	v.rel, v.toKind = "none", "none"
	if len(in.To) > 0 {
		l, d := splitAddress(in.To[0])
		v.emitS(groupHeader, "h:to:"+shape(l))
		// Who writes to whom: a person's own mailbox to a team's address is a customer,
		// to a person's mailbox more often a colleague, a friend or a pitch.
		v.toKind = senderKind(l, d)
		v.rel = senderKind(local, domain) + ">" + v.toKind
		v.emitS(groupHeader, "h:rel:"+v.rel)
		if d != "" && d == domain {
			v.emitS(groupHeader, "h:samedomain")
		}
	}
	for _, f := range headerFacts(in.Headers, domain) {
		v.emitS(groupHeader, f)
	}
	if in.RepliesToOurs {
		v.emitS(groupHeader, "h:ours")
	}
	s := strings.TrimSpace(in.Subject)
	low := strings.ToLower(s)
	switch {
	case s == "":
		v.emitS(groupHeader, "h:subj:empty")
	case hasAnyPrefix(low, "re:", "aw:", "sv:", "antw:", "r:", "rif:", "odp:", "res:"):
		v.emitS(groupHeader, "h:subj:re")
	case hasAnyPrefix(low, "fwd:", "fw:", "wg:", "tr:", "enc:", "rv:", "i:"):
		v.emitS(groupHeader, "h:subj:fwd")
	}
	if strings.HasPrefix(s, "[") {
		v.emitS(groupHeader, "h:subj:tag")
	}
	if upperShare(s) > 0.6 {
		v.emitS(groupHeader, "h:subj:caps")
	}
	if strings.Contains(s, "?") {
		v.emitS(groupHeader, "h:subj:q")
	}
	if strings.Contains(s, "!") {
		v.emitS(groupHeader, "h:subj:excl")
	}
	if !in.ReceivedAt.IsZero() {
		t := in.ReceivedAt.UTC()
		v.emitS(groupHeader, "h:hour:"+[]string{"night", "morning", "afternoon", "evening"}[hourBucket(t.Hour())])
		if t.Weekday() == time.Saturday || t.Weekday() == time.Sunday {
			v.emitS(groupHeader, "h:weekend")
		}
	}
	v.emitS(groupHeader, "h:len:"+bucket(utf8.RuneCountInString(in.Text), 0, 40, 200, 600, 1500, 4000))
}

func hourBucket(h int) int {
	switch {
	case h < 6:
		return 0
	case h < 12:
		return 1
	case h < 18:
		return 2
	}
	return 3
}

// bucket names the last bound n reaches: bucket(5, 1, 2, 3, 6) is "3+".
func bucket(n int, bounds ...int) string {
	name := "lt"
	for _, b := range bounds {
		if n >= b {
			name = itoa(b) + "+"
		}
	}
	return name
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// shape lowercases an address part and folds digits, so "ann88" and "ann12" agree.
func shape(s string) string {
	s = strings.ToLower(s)
	if len(s) > maxTokenBytes {
		return "<long>"
	}
	b := []byte(s)
	for i, c := range b {
		if c >= '0' && c <= '9' {
			b[i] = '#'
		}
	}
	return string(b)
}

// splitAddress returns the local part and domain of "addr" or "Name <addr>".
func splitAddress(a string) (string, string) {
	if i := strings.LastIndexByte(a, '<'); i >= 0 {
		a = strings.TrimSuffix(a[i+1:], ">")
	}
	a = strings.TrimSpace(a)
	at := strings.LastIndexByte(a, '@')
	if at < 0 {
		return a, ""
	}
	return a[:at], strings.ToLower(a[at+1:])
}

func hasAnyPrefix(s string, ps ...string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func upperShare(s string) float64 {
	letters, upper := 0, 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			letters++
			if unicode.IsUpper(r) {
				upper++
			}
		}
	}
	if letters < 4 {
		return 0
	}
	return float64(upper) / float64(letters)
}
