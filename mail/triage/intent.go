package triage

import "strings"

// What the sender's own sentences do, whatever they are about: ask the reader for
// something ("could you", "please send", "let me know"), ask leave to sell ("can I send
// over", "would you be open to", "worth a chat"), describe what the sender sells ("we help",
// "our clients"), or say what the sender would love ("we'd love to": a podcast's invitation
// and a pitch both say it). A kind of mail the model never saw has words it never learnt,
// but it asks in the phrases every kind asks in, so each family of phrases is one fact the
// whole corpus teaches; joined with who writes to whom (a request from outside to a team's
// address, a pitch to a person) and with the closing question, it tells a request that
// needs an answer from a pitch that needs none.

// intentValue is the value of an intent fact: that of a header fact (on the folds, 0.5,
// 0.7 and 1 did no better for needsReply).
const intentValue = headerValue

// Families of phrases.
const (
	intentAsk = iota
	intentOffer
	intentPitch
	intentLove
	numIntents
)

var intentNames = [numIntents]string{"ask", "offer", "pitch", "love"}

// intentPhrases maps phrases of one to four lowercased words to their family. A longer
// phrase wins over a shorter one at the same word ("would you be open" is an offer,
// "would you" a request).
var intentPhrases = map[string]int8{}

// intentFirst holds the first word of every phrase: most words start none, and one lookup
// says so.
var intentFirst = map[string]bool{}

func init() {
	for fam, phrases := range [numIntents][]string{
		intentAsk: {
			"could you", "can you", "would you", "will you", "could we", "would you mind", "would you be able",
			"are you able", "is it possible", "would it be possible", "is there any way", "do you have", "do you know",
			"please send", "please confirm", "please let", "please check", "please advise", "please call", "please reply",
			"please help", "please get", "please update", "please fix", "please sign", "please pay", "please review",
			"let me know", "let us know", "get back to me", "get back to us",
			"i need", "we need", "i'd like", "we'd like", "i would like", "we would like", "i was wondering",
			"we were wondering", "i'm looking for", "we're looking for", "can i get", "could i get", "can we get",
			"may i ask", "i'm writing to ask", "i am writing to ask", "i'm writing to request", "kindly",
			"is there a way", "how do i", "how can i", "how do we", "how can we", "where can i", "where do i",
			"are you free", "are we still", "what time", "when can", "when will", "can someone", "could someone",
		},
		intentOffer: {
			"can i send", "could i send", "may i send", "shall i send", "can i share", "could i share", "can i show",
			"would you be open", "would you be interested", "are you open", "are you interested", "are you the right",
			"who is the right", "who's the right", "worth a", "open to a", "interested in a", "is this something",
			"would it make sense", "does it make sense", "do you have time",
			"can we set up", "can we book", "quick call", "quick chat", "free trial", "free audit", "book a demo",
		},
		intentPitch: {
			"we help", "we've helped", "we have helped", "i help", "we work with", "works with companies",
			"our clients", "our customers", "we specialize", "we specialise", "we offer", "we provide", "we've built",
			"we have built", "our platform", "our solution", "our team can", "companies like", "teams like",
			"without hiring", "case study", "special offer", "limited time",
		},
		intentLove: {
			"we'd love to", "i'd love to", "we would love to", "i would love to", "we'd be delighted", "we'd be honoured",
			"we'd be honored", "would love to have", "we'd be thrilled",
		},
	} {
		for _, p := range phrases {
			intentPhrases[p] = int8(fam)
			first, _, _ := strings.Cut(p, " ")
			intentFirst[first] = true
		}
	}
}

// maxIntentWords is the length of the longest phrase.
const maxIntentWords = 4

// intentReader finds the families of phrases in the sender's own lines.
type intentReader struct {
	words   []byte  // the current line's words, each followed by a space
	ends    []int32 // where each word of words ends
	key     []byte
	line    int              // own lines read
	found   [numIntents]bool // the family occurs
	foundAt [numIntents]int  // the last own line (from 1) it occurs in
}

// reset starts a new message, keeping the buffers.
func (r *intentReader) reset() {
	*r = intentReader{words: r.words[:0], ends: r.ends[:0]}
}

// word adds a word of the current line.
func (r *intentReader) word(t []byte) {
	r.words = append(append(r.words, t...), ' ')
	r.ends = append(r.ends, int32(len(r.words)-1))
}

// endLine matches the phrases of the line read and starts the next, longest first from
// each word.
func (r *intentReader) endLine() {
	r.line++
	n := len(r.ends)
	for i := 0; i < n; {
		start := 0
		if i > 0 {
			start = int(r.ends[i-1]) + 1
		}
		matched := 1
		if !intentFirst[string(r.words[start:r.ends[i]])] {
			i++
			continue
		}
		for k := min(maxIntentWords, n-i); k >= 1; k-- {
			if fam, ok := intentPhrases[string(r.words[start:r.ends[i+k-1]])]; ok {
				r.found[fam], r.foundAt[fam] = true, r.line
				matched = k
				break
			}
		}
		i += matched
	}
	r.words, r.ends = r.words[:0], r.ends[:0]
}

// facts emits each family found, joined with rel (who writes to whom, from the headers)
// and with toKind (the recipient's address kind), and the families of the line the text's
// closing question is on (questionLine, 0 when it does not close on one).
func (r *intentReader) facts(rel, toKind string, questionLine int, emit func(string)) {
	closing := false
	for fam, ok := range r.found {
		if !ok {
			continue
		}
		name := intentNames[fam]
		emit("h:int:" + name)
		emit("h:int:" + name + ":" + rel)
		emit("h:int:" + name + ">" + toKind)
		if questionLine > 0 && r.foundAt[fam] == questionLine {
			emit("h:qend:" + name)
			closing = true
		}
	}
	if questionLine > 0 && !closing {
		emit("h:qend:none")
	}
}
