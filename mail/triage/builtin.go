package triage

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Builtin is the built-in provider: the embedded logistic-regression model. It needs no
// network and answers in well under a millisecond, so it never fails.
type Builtin struct {
	model *Model
	seen  *gramCache

	// free holds the scratches not in use, kept for good: one for each Predict that ran
	// at once, up to maxFree. (A sync.Pool drops what it holds at every collection, and a
	// server under a stream of mail collected every few hundred messages: each scratch
	// dropped was made again, its 340 KB count array with it, 8 KB a message in all.)
	mu   sync.Mutex
	free []*scratch
}

// maxFree bounds the scratches a Builtin keeps: more than twice as many Predicts as
// there are Ps to run them are rarely under way at once (it never waits), and a burst
// of more must not leave their memory held for good.
func maxFree() int { return 2 * runtime.GOMAXPROCS(0) }

type scratch struct {
	vec  *vectorizer
	x    sparse
	outs [3][]float64 // per head (HeadCategory, HeadReply, HeadUrgency)
}

// NewBuiltin returns the provider over the model embedded in the binary.
func NewBuiltin() (*Builtin, error) {
	m, err := EmbeddedModel()
	if err != nil {
		return nil, err
	}
	return NewBuiltinModel(m), nil
}

// EmbeddedModel loads the model embedded in the binary.
func EmbeddedModel() (*Model, error) { return LoadModel(embeddedModel) }

// NewBuiltinModel returns the provider over m (the evaluation uses a model file).
func NewBuiltinModel(m *Model) *Builtin {
	return &Builtin{model: m.serving(), seen: newGramCache(maxCachedWords)}
}

// scratch returns a scratch for one Predict; done gives it back.
func (b *Builtin) scratch() *scratch {
	b.mu.Lock()
	if n := len(b.free); n > 0 {
		s := b.free[n-1]
		b.free = b.free[:n-1]
		b.mu.Unlock()
		return s
	}
	b.mu.Unlock()
	s := &scratch{vec: b.model.newVectorizer(b.seen)}
	for i, h := range b.model.Heads {
		s.outs[i] = make([]float64, len(h.Classes))
	}
	return s
}

func (b *Builtin) done(s *scratch) {
	b.mu.Lock()
	if len(b.free) < maxFree() {
		b.free = append(b.free, s)
	}
	b.mu.Unlock()
}

// Model names the model and its version.
func (b *Builtin) Model() string { return b.model.Name }

// Analyze scores one message.
func (b *Builtin) Analyze(_ context.Context, in Input) (Scores, error) {
	return b.Predict(in), nil
}

// Predict scores one message; it is safe for concurrent use.
func (b *Builtin) Predict(in Input) Scores {
	s := b.scratch()
	defer b.done(s)
	var sc Scores
	sc.InputTokens = int64(s.vec.vector(in, &s.x))
	b.model.predictAll(&s.x, s.outs[:])
	copy(sc.Category[:], s.outs[HeadCategory])
	sc.NeedsReply = s.outs[HeadReply][1]
	copy(sc.Urgency[:], s.outs[HeadUrgency])
	return sc
}

// Inline returns Result: the built-in model answers at once, without the network.
func (b *Builtin) Inline() func(m *db.NewMessage, now time.Time) *db.Triage { return b.Result }

// Result analyzes a message about to be stored, at now: the result the Worker would store
// for it (mail.Service.TriageNow).
func (b *Builtin) Result(m *db.NewMessage, now time.Time) *db.Triage {
	in := NewInput(m.From, m.To, m.Cc, m.Subject, m.Timestamp, m.Text).WithSignals(m.TriageSignals)
	start := time.Now()
	s := b.Predict(in)
	return Derive(s, b.Model(), now, time.Since(start), in.Truncated)
}
