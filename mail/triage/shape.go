package triage

import "strings"

// Facts about how the sender's own text is put together: how many sentences it has,
// where its questions are, and whether it speaks as "we" or "I". They tell a pitch from a
// request apart from its topic: a pitch says "we" and ends on its one question ("open to a
// quick call?", which owes it no answer), where a request asks in a short note or in the
// middle of what it says. Words alone miss this because the same words ("quick", "call",
// "could") turn up in both. (Greeting and sign-off words, and counts of each pronoun,
// were tried too: they learn the writers' habits and cost category accuracy on
// held-out kinds of mail.)

// shapeReader reads the sender's own lines one at a time and says what shape they have.
type shapeReader struct {
	sentences       int
	questions       int  // sentences that end in a question mark
	lastIsQuestion  bool // the last sentence is a question
	firstQuestionAt int  // sentence number (from 1) of the first question, 0 for none
	we, i           int  // first-person plural and singular words
	lines           int  // own lines read
	questionLine    int  // the own line (from 1) the last question ends on
}

// line reads one own line of the text.
func (s *shapeReader) line(line string) {
	s.lines++
	if t := strings.TrimSpace(line); t != "" {
		s.sentencesOf(t)
	}
}

// sentencesOf counts the sentences of a line: each run of text ending in . ! or ?, and a
// last run without one when it has at least four words, two of them lowercase (many write
// without full stops; a shorter run is a greeting, a sign-off or a name, and one of
// capitalized words a signature's title or address). A ? inside a word (a URL's query)
// ends nothing.
func (s *shapeReader) sentencesOf(t string) {
	words, lower, letters, inWord := 0, 0, false, false
	for k := 0; k < len(t); k++ {
		c := t[k]
		switch {
		case c == '.' || c == '!' || c == '?':
			if k+1 < len(t) && !endsSentence(t[k+1]) {
				continue
			}
			if letters {
				s.sentence(c == '?')
			} else if c == '?' && s.sentences > 0 && !s.lastIsQuestion {
				s.questionMark() // "!?" after the sentence already ended
			}
			words, lower, letters, inWord = 0, 0, false, false
		case c == ' ' || c == '\t':
			inWord = false
		default:
			if !inWord {
				words++
				if c >= 'a' && c <= 'z' {
					lower++
				}
				inWord = true
			}
			letters = true
		}
	}
	if letters && words >= 4 && lower >= 2 {
		s.sentence(false)
	}
}

// endsSentence reports whether a byte after . ! or ? lets it end a sentence.
func endsSentence(next byte) bool {
	switch next {
	case ' ', '"', ')', '.', '?', '!':
		return true
	}
	return false
}

func (s *shapeReader) sentence(question bool) {
	s.sentences++
	s.lastIsQuestion = question
	if question {
		s.questionMark()
	}
}

func (s *shapeReader) questionMark() {
	s.questions++
	s.lastIsQuestion = true
	s.questionLine = s.lines
	if s.firstQuestionAt == 0 {
		s.firstQuestionAt = s.sentences
	}
}

// word counts the first-person pronouns among the own text's (lowercased) words.
func (s *shapeReader) word(t []byte) {
	if len(t) > 5 {
		return
	}
	switch string(t) {
	case "we", "our", "us", "ours", "we're", "we've", "we'll", "we'd":
		s.we++
	case "i", "my", "me", "mine", "i'm", "i've", "i'll", "i'd":
		s.i++
	}
}

// closingQuestionLine is the own line (from 1) of the question the text closes on, 0 when
// it does not close on one.
func (s *shapeReader) closingQuestionLine() int {
	if s.lastIsQuestion {
		return s.questionLine
	}
	return 0
}

// facts are the shape facts of the text read.
func (s *shapeReader) facts(emit func(string)) {
	emit("h:sent:" + bucket(s.sentences, 1, 2, 4, 8, 16))
	switch {
	case s.questions == 0:
	case s.lastIsQuestion && s.firstQuestionAt == s.sentences && s.sentences >= 4:
		emit("h:qshape:one-at-end") // a long text whose only question closes it: the pitch's shape
	case s.lastIsQuestion && s.sentences >= 4:
		emit("h:qshape:end")
	case s.sentences < 4:
		emit("h:qshape:short")
	default:
		emit("h:qshape:inside")
	}
	switch {
	case s.we >= 2 && s.we > s.i:
		emit("h:voice:we")
	case s.i >= 2 && s.i > s.we:
		emit("h:voice:i")
	}
}
