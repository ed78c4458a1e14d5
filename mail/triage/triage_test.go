package triage

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
)

func sum(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

// TestDeriveThresholds pins the thresholds of API-NOTES section 8 at their edges.
func TestDeriveThresholds(t *testing.T) {
	at := time.Date(2026, 11, 3, 9, 30, 0, 123e6, time.FixedZone("CET", 3600))
	reply := []struct {
		p    float64
		want any
	}{{0.8, true}, {0.95, true}, {0.7999, nil}, {0.5, nil}, {0.2001, nil}, {0.2, false}, {0, false}}
	for _, r := range reply {
		tr := Derive(Scores{Category: [6]float64{1}, NeedsReply: r.p, Urgency: [4]float64{1}}, "m", at, 0, false)
		if r.want == nil {
			qt.Check(t, tr.NeedsReply.Value, qt.IsNil, qt.Commentf("p=%v", r.p))
		} else {
			qt.Check(t, tr.NeedsReply.Value, qt.Not(qt.IsNil), qt.Commentf("p=%v", r.p))
			if tr.NeedsReply.Value != nil {
				qt.Check(t, *tr.NeedsReply.Value, qt.Equals, r.want, qt.Commentf("p=%v", r.p))
			}
		}
		qt.Check(t, tr.NeedsReply.Probability, qt.Equals, r.p)
	}

	urgency := []struct {
		probs      [4]float64
		score      float64
		confidence float64
		value      any
	}{
		{[4]float64{1, 0, 0, 0}, 0, 1, "low"},
		{[4]float64{0, 0, 0, 1}, 3, 1, "critical"},
		{[4]float64{0, 0.5, 0.5, 0}, 1.5, 0.5, "high"},   // 1.5 rounds up to 2; its probability 0.5 is enough
		{[4]float64{0, 0.6, 0.4, 0}, 1.4, 0.6, "normal"}, // expected level 1.4
		{[4]float64{0.3, 0.4, 0.3, 0}, 1, 0.4, nil},      // unsure: null below confidence 0.5
		{[4]float64{0.5, 0, 0, 0.5}, 1.5, 0, nil},        // the score's level has no weight at all
		{[4]float64{2, 6, 2, 0}, 1, 0.6, "normal"},       // weights are normalized first
		{[4]float64{0.1, 0.1, 0.55, 0.25}, 1.95, 0.55, "high"},
	}
	for _, u := range urgency {
		tr := Derive(Scores{Category: [6]float64{1}, Urgency: u.probs}, "m", at, 0, false)
		c := qt.Commentf("probs %v", u.probs)
		qt.Check(t, tr.Urgency.Score, qt.Equals, u.score, c)
		qt.Check(t, tr.Urgency.Confidence, qt.Equals, u.confidence, c)
		if u.value == nil {
			qt.Check(t, tr.Urgency.Value, qt.IsNil, c)
		} else if qt.Check(t, tr.Urgency.Value, qt.Not(qt.IsNil), c) {
			qt.Check(t, *tr.Urgency.Value, qt.Equals, u.value, c)
		}
		qt.Check(t, math.Abs(sum(tr.Urgency.Probabilities)-1) < 1e-12, qt.IsTrue, c)
		qt.Check(t, len(tr.Urgency.Probabilities), qt.Equals, 4)
	}
}

// TestDeriveShape checks the fixed parts of a complete result: version 1, a UTC time
// ending in Z, all six categories summing to 1, the model name bounded.
func TestDeriveShape(t *testing.T) {
	c := qt.New(t)
	at := time.Date(2026, 11, 3, 9, 30, 0, 123e6, time.FixedZone("CET", 3600))
	tr := Derive(Scores{Category: [6]float64{0.1, 0.2, 0.3, 0.15, 0.15, 0.1}, NeedsReply: 0.5, Urgency: [4]float64{0.25, 0.25, 0.25, 0.25},
		InputTokens: 12}, strings.Repeat("m", 150), at, 1500*time.Microsecond, true)
	c.Assert(tr.Status, qt.Equals, "complete")
	c.Assert(tr.Version, qt.Equals, 1)
	c.Assert(tr.AnalyzedAt, qt.Equals, "2026-11-03T08:30:00.123Z")
	c.Assert(len(tr.Model), qt.Equals, 100)
	c.Assert(*tr.DurationMs, qt.Equals, int64(1))
	c.Assert(*tr.BodyTruncated, qt.IsTrue)
	c.Assert(tr.Usage.InputTokens, qt.Equals, int64(12))
	c.Assert(tr.Category.Value, qt.Equals, "sales")
	c.Assert(tr.Category.Confidence, qt.Equals, 0.3)
	c.Assert(tr.Category.Probabilities, qt.HasLen, 6)
	for _, k := range db.TriageCategories() {
		_, ok := tr.Category.Probabilities[k]
		c.Assert(ok, qt.IsTrue, qt.Commentf("category %s", k))
	}
	c.Assert(math.Abs(sum(tr.Category.Probabilities)-1) < 1e-12, qt.IsTrue)

	f := Failed(CodeRejected, at)
	c.Assert(f.Status, qt.Equals, "failed")
	c.Assert(f.Code, qt.Equals, "provider_rejected")
	c.Assert(f.FailedAt, qt.Equals, "2026-11-03T08:30:00.123Z")
}

// TestNewInputLimits checks the model input of API-NOTES section 8: 50 recipients, a
// subject of 998 and a text of 32,768 characters (not bytes).
func TestNewInputLimits(t *testing.T) {
	c := qt.New(t)
	var to, cc []string
	for i := 0; i < 40; i++ {
		to = append(to, "to@x.test")
		cc = append(cc, "cc@x.test")
	}
	text := strings.Repeat("é", MaxTextChars)
	in := NewInput("a@x.test", to, cc, strings.Repeat("s", 1000), time.Now(), text)
	c.Assert(in.To, qt.HasLen, 50)
	c.Assert(in.To[39], qt.Equals, "to@x.test")
	c.Assert(in.To[40], qt.Equals, "cc@x.test")
	c.Assert(len(in.Subject), qt.Equals, 998)
	c.Assert(in.Text, qt.Equals, text)
	c.Assert(in.Truncated, qt.IsFalse)

	in = NewInput("a@x.test", nil, nil, "", time.Now(), text+"ü and more")
	c.Assert(in.Text, qt.Equals, text)
	c.Assert(in.Truncated, qt.IsTrue)
	in = NewInput("a@x.test", nil, nil, "", time.Now(), strings.Repeat("a", MaxTextChars+1))
	c.Assert([]rune(in.Text), qt.HasLen, MaxTextChars)
	c.Assert(in.Truncated, qt.IsTrue)
}

// TestBuiltin checks the embedded model end to end on mail it never saw: the kinds of
// message a user would expect it to get right. The accuracy figures come from
// scripts/triage-eval.sh on the held-out corpus.
func TestBuiltin(t *testing.T) {
	c := qt.New(t)
	b, err := NewBuiltin()
	c.Assert(err, qt.IsNil)
	c.Assert(b.Model(), qt.Equals, ModelName)
	at := time.Date(2026, 5, 12, 10, 4, 0, 0, time.UTC)
	cases := []struct {
		from, subject, text string
		category            string
		reply               bool
		minUrgency          int
	}{
		{"noreply@payments.example", "Your receipt #4432", "Thanks for your payment. Amount paid: $49.00\nPayment method: Visa ending in 4242\nKeep this email for your records.",
			"billing", false, 0},
		{"dana.k@customer-co.example", "Your API is down", "Hi,\n\nyour API has been returning 500 errors for every request since 09:14 UTC and our checkout is down. We are losing orders. Please escalate immediately!\n\nDana",
			"support", true, 2},
		{"alerts@monitoring.example", "[CRITICAL] db-2 is DOWN", "db-2 has not responded to health checks for 7 minutes. Severity: critical. On-call has been paged.",
			"notification", false, 2},
		{"lou1988@gmail.com", "Dinner Saturday?", "Hey! Are you free for dinner on Saturday? Thinking tapas. Let me know so I can book a table.\n\nLou",
			"personal", true, 0},
	}
	for _, k := range cases {
		s, err := b.Analyze(context.Background(), NewInput(k.from, []string{"me@inboxd.test"}, nil, k.subject, at, k.text))
		c.Assert(err, qt.IsNil)
		tr := Derive(s, b.Model(), at, 0, false)
		cm := qt.Commentf("%s: %+v %+v %+v", k.subject, tr.Category, tr.NeedsReply, tr.Urgency)
		c.Check(tr.Category.Value, qt.Equals, k.category, cm)
		c.Check(tr.NeedsReply.Probability >= 0.5, qt.Equals, k.reply, cm)
		c.Check(tr.Urgency.Score >= float64(k.minUrgency)-0.5, qt.IsTrue, cm)
		c.Check(math.Abs(sum(tr.Category.Probabilities)-1) < 1e-12, qt.IsTrue, cm)
		c.Check(s.InputTokens > 0, qt.IsTrue)
	}
}

// TestCorpus checks the labelled corpus has what the model and its evaluation need: at
// least 600 messages covering every label, and a held-out split of about a fifth.
func TestCorpus(t *testing.T) {
	c := qt.New(t)
	all, err := LoadCorpus("../../fixtures/triage/corpus.jsonl", mail.HTMLToText)
	c.Assert(err, qt.IsNil)
	c.Assert(len(all) >= 600, qt.IsTrue)
	count := map[string]int{}
	ids := map[string]bool{}
	for _, e := range all {
		c.Assert(ids[e.ID], qt.IsFalse, qt.Commentf("duplicate id %s", e.ID))
		ids[e.ID] = true
		count[e.Split]++
		count[e.Split+" "+db.TriageCategories()[e.Category]]++
		count[e.Split+" urgency "+db.UrgencyLevels()[e.Urgency]]++
		if e.Reply {
			count[e.Split+" reply"]++
		} else {
			count[e.Split+" no reply"]++
		}
	}
	share := float64(count["test"]) / float64(len(all))
	c.Assert(share > 0.18 && share < 0.22, qt.IsTrue, qt.Commentf("held-out share %.3f", share))
	for _, split := range []string{"train", "test"} {
		for _, k := range append(append([]string{"reply", "no reply"}, db.TriageCategories()...), prefixed("urgency ", db.UrgencyLevels())...) {
			c.Check(count[split+" "+k] >= 10, qt.IsTrue, qt.Commentf("%s %s: %d", split, k, count[split+" "+k]))
		}
	}
}

func prefixed(p string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = p + x
	}
	return out
}

// TestLookupFindsExactlyTheFeatures checks the filter in front of the feature map: every
// feature is found at its position, and keys that are not features (near misses among
// them) are not.
func TestLookupFindsExactlyTheFeatures(t *testing.T) {
	m, err := LoadModel(embeddedModel)
	qt.Assert(t, err, qt.IsNil)
	features := map[string]bool{}
	for _, f := range m.Features {
		features[f] = true
	}
	for i, f := range m.Features {
		got, ok := m.lookup([]byte(f))
		qt.Assert(t, ok, qt.IsTrue, qt.Commentf("%q", f))
		qt.Assert(t, got, qt.Equals, int32(i))
		for _, near := range []string{f + "x", "x" + f, strings.ToUpper(f), f[:len(f)-1]} {
			if !features[near] {
				_, ok := m.lookup([]byte(near))
				qt.Assert(t, ok, qt.IsFalse, qt.Commentf("%q", near))
			}
		}
	}
}

// TestTestSetsNeverTrained keeps the hand-written test sets out of training: every line of
// them is marked "test", and no test message (by id, or by its subject and text) is among
// the messages training reads.
func TestTestSetsNeverTrained(t *testing.T) {
	c := qt.New(t)
	all, err := LoadTrainingSet("../../fixtures/triage/corpus.jsonl", "../../fixtures/triage/written/*.jsonl", mail.HTMLToText)
	c.Assert(err, qt.IsNil)
	train := TrainSplit(all)
	c.Assert(len(train) > len(all)/2, qt.IsTrue)
	ids, texts := map[string]bool{}, map[string]bool{}
	for _, e := range train {
		ids[e.ID], texts[e.In.Subject+"\n"+e.In.Text] = true, true
	}
	files, err := filepath.Glob("../../fixtures/triage/handwritten*.jsonl")
	c.Assert(err, qt.IsNil)
	c.Assert(len(files) >= 2, qt.IsTrue)
	for _, f := range files {
		test, err := LoadCorpus(f, mail.HTMLToText)
		c.Assert(err, qt.IsNil)
		for _, e := range test {
			c.Check(e.Split, qt.Equals, "test", qt.Commentf("%s %s", f, e.ID))
			c.Check(ids[e.ID] || texts[e.In.Subject+"\n"+e.In.Text], qt.IsFalse, qt.Commentf("%s %s is trained on", f, e.ID))
		}
	}
}

// TestCorpusLinesReadAsLiveMail: a corpus line reaches the model as the same message
// arriving over SMTP would: HTML-only mail as the pipeline's text, headers in canonical
// form and only those the pipeline keeps, and the reply-to-ours mark.
func TestCorpusLinesReadAsLiveMail(t *testing.T) {
	c := qt.New(t)
	path := filepath.Join(t.TempDir(), "c.jsonl")
	line := `{"id":"x1","split":"train","writer":"w9","scenario":"other/newsletter","from":"news@shop.example","to":["me@x.test"],` +
		`"subject":"Spring","receivedAt":"2026-03-14T09:12:31Z","headers":{"list-unsubscribe":"<https://shop.example/u>","X-GitHub-Reason":"x"},` +
		`"repliesToOurs":true,"html":"<p>Big <b>sale</b></p><p>Shop&nbsp;now</p>","labels":{"category":"other","needsReply":false,"urgency":0}}`
	c.Assert(os.WriteFile(path, []byte(line+"\n"), 0o644), qt.IsNil)
	ex, err := LoadCorpus(path, mail.HTMLToText)
	c.Assert(err, qt.IsNil)
	c.Assert(ex, qt.HasLen, 1)
	in := ex[0].In
	c.Assert(in.Text, qt.Equals, mail.HTMLToText("<p>Big <b>sale</b></p><p>Shop&nbsp;now</p>"))
	c.Assert(in.Headers, qt.DeepEquals, map[string]string{"List-Unsubscribe": "<https://shop.example/u>"})
	c.Assert(in.RepliesToOurs, qt.IsTrue)
	c.Assert(ex[0].Writer, qt.Equals, "w9")
}

// TestTrainedModelAnswersAsItsFile: a model retrained in memory, as the evaluation's
// held-out folds use it, answers every message exactly as the same model read back from
// its file.
func TestTrainedModelAnswersAsItsFile(t *testing.T) {
	c := qt.New(t)
	all, err := LoadCorpus("../../fixtures/triage/corpus.jsonl", mail.HTMLToText)
	c.Assert(err, qt.IsNil)
	train := TrainSplit(all)[:200]
	fixed := HeadParams{Lambda: 1e-4, CharPenalty: 3, Temperature: 1}
	m := Train(train, TrainOptions{Iterations: 20, Fixed: []HeadParams{fixed, fixed, fixed}})
	raw, err := m.Encode()
	c.Assert(err, qt.IsNil)
	back, err := LoadModel(raw)
	c.Assert(err, qt.IsNil)
	inMemory, fromFile := NewBuiltinModel(m), NewBuiltinModel(back)
	for _, e := range all[:50] {
		c.Assert(inMemory.Predict(e.In), qt.DeepEquals, fromFile.Predict(e.In), qt.Commentf("%s", e.ID))
	}
}
