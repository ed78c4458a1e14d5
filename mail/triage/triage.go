// Package triage analyzes incoming mail: a category with probabilities for all six, whether
// it needs a reply, and how urgent it is (spec section 2.4, API-NOTES section 8).
//
// Two providers produce the scores: Builtin, a logistic-regression text classifier whose
// weights are embedded in the binary (trained by `go generate ./mail/triage` from the
// corpus in fixtures/triage), and LLM, an OpenAI-compatible chat-completions endpoint.
// Both go through Derive, which applies the thresholds of API-NOTES section 8, so the two
// agree on what a probability means. The Worker takes messages from the durable queue in
// db and writes results back.
package triage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/inboxd/inboxd/db"
)

// Limits of the model input (API-NOTES section 8).
const (
	MaxRecipients = 50
	MaxSubjectLen = 998
	MaxTextChars  = 32768
	ResultVersion = 1
	maxModelName  = 100
	probDecimals  = 1e4 // probabilities are reported to four decimals
	replyYesAt    = 0.8
	replyNoAt     = 0.2
	urgencyNullLT = 0.5
)

// Input is what a provider sees of a message: sender, up to 50 recipients, subject,
// received time and the first 32,768 characters of the plain text (for HTML-only mail, the
// text the receive pipeline made of it). No HTML, attachments or Bcc. Besides the words,
// the header fields of db.TriageHeaderNames and whether it answers mail its inbox sent
// (WithSignals).
type Input struct {
	From       string
	To         []string
	Subject    string
	ReceivedAt time.Time
	Text       string
	// Truncated reports that Text was cut to MaxTextChars.
	Truncated bool
	// Headers are the fields of db.TriageHeaderNames the message carries.
	Headers map[string]string
	// RepliesToOurs: the message answers mail its inbox sent.
	RepliesToOurs bool
}

// WithSignals returns in with what triage knows besides the words: the header fields of
// db.TriageHeaderNames among sig.Headers (others are left out, so a corpus line naming more
// headers is seen as live mail would be) and whether it answers mail its inbox sent.
func (in Input) WithSignals(sig db.TriageSignals) Input {
	in.Headers = nil
	for _, name := range db.TriageHeaderNames() {
		if v, ok := sig.Headers[name]; ok {
			if in.Headers == nil {
				in.Headers = map[string]string{}
			}
			in.Headers[name] = v
		}
	}
	in.RepliesToOurs = sig.RepliesToOurs
	return in
}

// NewInput applies the input limits to a message's fields: recipients are To then Cc, the
// first 50; the subject and text are cut to their maximum length in characters.
func NewInput(from string, to, cc []string, subject string, receivedAt time.Time, text string) Input {
	rcpt := make([]string, 0, min(len(to)+len(cc), MaxRecipients))
	for _, list := range [][]string{to, cc} {
		for _, a := range list {
			if len(rcpt) < MaxRecipients {
				rcpt = append(rcpt, a)
			}
		}
	}
	subject, _ = cutChars(subject, MaxSubjectLen)
	text, cut := cutChars(text, MaxTextChars)
	return Input{From: from, To: rcpt, Subject: subject, ReceivedAt: receivedAt.UTC(), Text: text, Truncated: cut}
}

// cutChars returns the first n characters (runes) of s, and whether anything was cut.
func cutChars(s string, n int) (string, bool) {
	if len(s) <= n { // n bytes hold at most n runes
		return s, false
	}
	i := 0
	for k := 0; k < n; k++ {
		if i >= len(s) {
			return s, false
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if i >= len(s) {
		return s, false
	}
	return s[:i], true
}

// Scores are a provider's answer before thresholds: a probability distribution over the
// categories (in db.TriageCategories order), the probability that the message needs a reply, and a
// distribution over urgency levels 0-3.
type Scores struct {
	// Model is the model that answered, when the provider reports one more precisely than
	// Provider.Model (an endpoint names the exact version it ran).
	Model        string
	Category     [6]float64
	NeedsReply   float64
	Urgency      [4]float64
	InputTokens  int64
	OutputTokens int64
}

// Provider analyzes one message. Errors that should end as a failed result are *Error.
type Provider interface {
	// Model names the model and its version, 1-100 characters.
	Model() string
	Analyze(ctx context.Context, in Input) (Scores, error)
	// Inline returns how to analyze a message as it is received, before it is stored,
	// for a provider that answers at once without the network (mail.Config.TriageNow);
	// nil leaves every analysis to the Worker.
	Inline() func(m *db.NewMessage, now time.Time) *db.Triage
}

// Failure codes of a failed triage (spec section 2.4).
const (
	CodeUnavailable     = "provider_unavailable"
	CodeRejected        = "provider_rejected"
	CodeInvalidResponse = "invalid_response"
)

// Error is a provider failure. Retry marks failures worth another attempt (network errors,
// 429, 5xx); RetryAfter is the provider's own hint, zero when it gave none.
type Error struct {
	Code       string
	Retry      bool
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	return fmt.Sprintf("triage: %s: %v", e.Code, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// asError classifies any error from a provider; an unknown error is a provider failure
// worth retrying (it is most likely a network or local condition).
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeUnavailable, Retry: true, Err: err}
}

// Derive turns scores into the complete triage result with the thresholds of API-NOTES
// section 8. Probabilities are normalized and reported to four decimals, with the rounding
// remainder on the largest, so each distribution sums to 1. The urgency score is the
// expected level; its confidence is the probability of the level the score rounds to.
func Derive(s Scores, model string, analyzedAt time.Time, duration time.Duration, truncated bool) *db.Triage {
	cat := normalize(s.Category[:])
	best := 0
	for i := range cat {
		if cat[i] > cat[best] {
			best = i
		}
	}
	categories := db.TriageCategories()
	catProbs := make(map[string]float64, len(categories))
	for i, c := range categories {
		catProbs[c] = cat[i]
	}
	p := round4(clamp01(s.NeedsReply))
	reply := replyValue(p)
	urg := normalize(s.Urgency[:])
	urgProbs := make(map[string]float64, 4)
	for i, v := range urg {
		urgProbs[strconv.Itoa(i)] = v
	}
	score, level, conf, decided := urgencyValue(urg)
	var urgency *string
	if decided {
		urgency = ptr(db.UrgencyLevels()[level])
	}
	if len(model) > maxModelName {
		model = model[:maxModelName]
	}
	ms := max(duration.Milliseconds(), 0)
	return &db.Triage{
		Status:        db.TriageComplete,
		Version:       ResultVersion,
		Model:         model,
		AnalyzedAt:    db.Time{Time: analyzedAt}.String(),
		DurationMs:    &ms,
		BodyTruncated: ptr(truncated),
		Usage:         &db.TriageUsage{InputTokens: max(s.InputTokens, 0), OutputTokens: max(s.OutputTokens, 0)},
		Category:      &db.TriageCategory{Value: categories[best], Confidence: cat[best], Probabilities: catProbs},
		NeedsReply:    &db.TriageNeedsReply{Value: reply, Probability: p},
		Urgency:       &db.TriageUrgency{Value: urgency, Score: score, Confidence: conf, Probabilities: urgProbs},
	}
}

// replyValue is needsReply.value for probability p: nil when it is uncertain.
func replyValue(p float64) *bool {
	switch {
	case p >= replyYesAt:
		return ptr(true)
	case p <= replyNoAt:
		return ptr(false)
	}
	return nil
}

// urgencyValue reads a distribution over urgency levels: its score (the expected level,
// rounded to four decimals), the level the score rounds to, that level's probability (the
// confidence), and whether the confidence is enough to name the level.
func urgencyValue(p []float64) (score float64, level int, conf float64, decided bool) {
	for i, v := range p {
		score += float64(i) * v
	}
	score = math.Min(3, math.Max(0, round4(score)))
	level = int(math.Round(score))
	conf = p[level]
	return score, level, conf, conf >= urgencyNullLT
}

// Failed is the failed triage result with code at the given time.
func Failed(code string, at time.Time) *db.Triage {
	return &db.Triage{Status: db.TriageFailed, Code: code, FailedAt: db.Time{Time: at}.String()}
}

// normalize scales non-negative weights to a distribution rounded to four decimals whose
// sum is exactly 1 in those decimals; all-zero weights become uniform.
func normalize(w []float64) []float64 {
	sum := 0.0
	for _, v := range w {
		sum += clampPos(v)
	}
	out := make([]float64, len(w))
	units := make([]int64, len(w))
	var total int64
	best := 0
	for i, v := range w {
		q := 1 / float64(len(w))
		if sum > 0 {
			q = clampPos(v) / sum
		}
		units[i] = int64(math.Round(q * probDecimals))
		total += units[i]
		if units[i] > units[best] {
			best = i
		}
	}
	units[best] += int64(probDecimals) - total
	for i, u := range units {
		out[i] = float64(u) / probDecimals
	}
	return out
}

func clampPos(v float64) float64 {
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	return v
}

func clamp01(v float64) float64 { return math.Min(1, clampPos(v)) }

func round4(v float64) float64 { return math.Round(v*probDecimals) / probDecimals }

func ptr[T any](v T) *T { return &v }
