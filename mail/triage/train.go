package triage

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/textproto"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Example is one labelled message of the corpus.
type Example struct {
	ID       string
	Split    string // train | test
	Writer   string // who wrote it: a hand writer's prefix, or "gen" for the generator
	Scenario string
	In       Input
	Category int  // index in db.TriageCategories
	Reply    bool // needs a reply
	Urgency  int  // 0-3
}

// corpusLine is the JSON-lines format of the files in fixtures/triage (LABELS.md, "A
// corpus line").
type corpusLine struct {
	ID            string            `json:"id"`
	Split         string            `json:"split"`
	Writer        string            `json:"writer"`
	Scenario      string            `json:"scenario"`
	From          string            `json:"from"`
	To            []string          `json:"to"`
	Cc            []string          `json:"cc"`
	Subject       string            `json:"subject"`
	ReceivedAt    string            `json:"receivedAt"`
	Headers       map[string]string `json:"headers"`
	RepliesToOurs bool              `json:"repliesToOurs"`
	Text          string            `json:"text"`
	HTML          string            `json:"html"`
	Labels        struct {
		Category   string `json:"category"`
		NeedsReply bool   `json:"needsReply"`
		Urgency    int    `json:"urgency"`
	} `json:"labels"`
}

// GeneratorWriter is the writer of corpus lines that name none: fixtures/triage/gen.
const GeneratorWriter = "gen"

// LoadCorpus reads a labelled corpus file (JSON lines). Each message goes through what
// live mail goes through: an HTML-only body becomes text as the receive pipeline makes it
// (htmlToText: callers pass mail.HTMLToText; this package cannot import mail, whose
// dependency schema imports this package in its tests), header names are put in canonical form
// and only those of db.TriageHeaderNames kept, and NewInput applies the input limits.
func LoadCorpus(path string, htmlToText func(string) string) ([]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Example
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var l corpusLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		at, err := time.Parse(time.RFC3339, l.ReceivedAt)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: receivedAt: %w", path, n, err)
		}
		cat := slices.Index(db.TriageCategories(), l.Labels.Category)
		if cat < 0 || l.Labels.Urgency < 0 || l.Labels.Urgency > 3 || (l.Split != "train" && l.Split != "test") {
			return nil, fmt.Errorf("%s:%d: bad labels or split", path, n)
		}
		out = append(out, Example{ID: l.ID, Split: l.Split, Writer: cmp.Or(l.Writer, GeneratorWriter), Scenario: l.Scenario,
			In: l.input(at, htmlToText), Category: cat, Reply: l.Labels.NeedsReply, Urgency: l.Labels.Urgency})
	}
	return out, sc.Err()
}

// input is the line as a provider would see it had it arrived over SMTP.
func (l *corpusLine) input(at time.Time, htmlToText func(string) string) Input {
	text := l.Text
	if strings.TrimSpace(text) == "" && l.HTML != "" {
		text = htmlToText(l.HTML)
	}
	sig := db.TriageSignals{RepliesToOurs: l.RepliesToOurs}
	for k, v := range l.Headers {
		if sig.Headers == nil {
			sig.Headers = map[string]string{}
		}
		sig.Headers[textproto.CanonicalMIMEHeaderKey(k)] = v
	}
	return NewInput(l.From, l.To, l.Cc, l.Subject, at, text).WithSignals(sig)
}

// LoadTrainingSet reads the generated corpus and the hand-written files that glob names
// (none when it is ""), in a fixed order, so training on them is the same on every run.
func LoadTrainingSet(corpus, glob string, htmlToText func(string) string) ([]Example, error) {
	all, err := LoadCorpus(corpus, htmlToText)
	if err != nil {
		return nil, err
	}
	if glob == "" {
		return all, nil
	}
	files, err := filepath.Glob(glob)
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	for _, f := range files {
		ex, err := LoadCorpus(f, htmlToText)
		if err != nil {
			return nil, err
		}
		all = append(all, ex...)
	}
	return all, nil
}

// TrainSplit returns the examples marked for training.
func TrainSplit(all []Example) []Example {
	var out []Example
	for _, e := range all {
		if e.Split == "train" {
			out = append(out, e)
		}
	}
	return out
}

// TrainOptions tune training; the zero value means the defaults.
type TrainOptions struct {
	MinDocs    int       // a feature must occur in this many training messages (default 2)
	Lambdas    []float64 // L2 penalties to choose from by cross-validation, for every head (default: headPenalties)
	Folds      int       // cross-validation folds, each a group of whole kinds of mail (default 4)
	Iterations int       // full-batch optimizer steps (default 300)
	// Fixed, when set, gives each head's penalty and temperature (in Model.Heads order)
	// instead of choosing them by cross-validation: a retraining for an evaluation fold.
	Fixed []HeadParams
	Log   func(format string, args ...any)
}

// headPenalties are what each head's penalties are chosen from, by cross-validated log
// loss on the held-out-kinds folds (chooseParams): the L2 penalty, and the multipliers of
// it that the words and word pairs of the sender's own text (HeadParams.BodyPenalty) and
// the character n-grams (CharPenalty) pay. On those folds (2026-11-27, 3,871 messages):
//   - needsReply and urgency did best at the smallest of 3e-5, 1e-4 and 3e-4 or within
//     0.3% of it (needsReply 0.2318 at 1e-5 against 0.2254 at 3e-5); needsReply reads the
//     body's words better with less shrinking: 0.2430 at 1, 0.2317 at 0.25, 0.2265 at 0.1
//     (0.2261 at 0.03, with fewer answers decided and right).
//   - The category (log loss after its prior offsets) went on gaining below 3e-5: 0.5080
//     at 1e-4, 0.4968 at 3e-5, 0.4880 at 1e-5, 0.4875 at 3e-6, 0.4933 at 1e-6, and with
//     each writer held out in turn 0.5922, 0.5674, 0.5486, 0.5368, 0.5350. Its character
//     n-grams want more shrinking than its words: at 3e-6, n-grams at twice the penalty
//     gave 0.4724 (writers 0.5283), three times 0.4659 (0.5242), five times 0.4630
//     (0.5258), ten times 0.4658 (0.5346). At 3e-5, the body's words at 0.3 of it gave
//     0.4919, the subject's 0.4928, n-grams 0.5263; header facts at 0.3 helped the kinds
//     (0.4915) and cost the writers (0.5814).
//   - The n-grams at a higher penalty helped the other heads too: needsReply 0.2256 at 1,
//     0.2219 at 3, 0.2218 at 5 (writers 0.2188, 0.2156, 0.2159); urgency 0.8815 at 1,
//     0.8666 at 3, 0.8624 at 5 (writers 0.9155, 0.9064, 0.9037).
var headPenalties = [3]struct{ lambdas, body, chars []float64 }{
	HeadCategory: {lambdas: []float64{3e-6}, body: []float64{1}, chars: []float64{3}},
	HeadReply:    {lambdas: []float64{3e-5}, body: []float64{1, 0.25, 0.1}, chars: []float64{3}},
	HeadUrgency:  {lambdas: []float64{3e-5}, body: []float64{1}, chars: []float64{5}},
}

// HeadParams are the hyperparameters of one head.
type HeadParams struct {
	Lambda, Temperature float64
	// BodyPenalty multiplies Lambda for the words and word pairs of the sender's own text
	// (0 means 1): a head that reads them better with less shrinking gets its own.
	BodyPenalty float64
	// CharPenalty multiplies Lambda for the character n-grams (0 means 1).
	CharPenalty float64
	// Offsets shift a softmax head's logits (before the temperature), one per class: the
	// priors that out-of-fold predictions on unseen kinds of mail call for (priorOffsets).
	Offsets []float64
}

// SameAs returns the options that retrain a model like m: its features' rules and each
// head's penalty and temperature.
func SameAs(m *Model) TrainOptions {
	var o TrainOptions
	for _, h := range m.Heads {
		o.Fixed = append(o.Fixed, HeadParams{Lambda: h.Lambda, BodyPenalty: h.BodyPenalty, CharPenalty: h.CharPenalty, Temperature: h.Temperature, Offsets: h.Offsets})
	}
	return o
}

func (o *TrainOptions) defaults() {
	if o.MinDocs == 0 {
		o.MinDocs = 2
	}
	if o.Folds == 0 {
		o.Folds = 4
	}
	if o.Iterations == 0 {
		o.Iterations = 300
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// KindFold puts a kind of mail (a corpus scenario) in one of n folds, by a hash of its
// name, so a kind keeps its fold whatever else the corpus holds.
func KindFold(scenario string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(scenario))
	return int(h.Sum32() % uint32(n))
}

// Train fits the three heads on examples. For each head it picks the L2 penalty (and the
// shares of it the body's words and the character n-grams pay, headPenalties) with the
// lowest cross-validated log loss, each fold holding out whole kinds of mail (KindFold),
// so the choice favours what carries over to mail of a kind the model never saw; fits a
// temperature and, for the softmax heads, class offsets on those out-of-fold predictions
// (calibration and priors on unseen kinds); then trains on all examples and divides the
// weights by the temperature. Training is deterministic: the same examples give the same
// model, bit for bit.
func Train(examples []Example, opts TrainOptions) *Model {
	opts.defaults()
	m := &Model{Name: ModelName, Features: vocabulary(examples, opts.MinDocs)}
	m.buildIndex()
	opts.Log("vocabulary: %d features from %d messages", len(m.Features), len(examples))
	vec := newVectorizer(m.lookup)
	xs := make([]sparse, len(examples))
	fold := make([]int, len(examples))
	for i, e := range examples {
		vec.vector(e.In, &xs[i])
		xs[i].idx = slices.Clone(xs[i].idx)
		xs[i].val = slices.Clone(xs[i].val)
		fold[i] = KindFold(e.Scenario, opts.Folds)
	}
	labels := [3][]int{}
	for _, e := range examples {
		r := 0
		if e.Reply {
			r = 1
		}
		labels[HeadCategory] = append(labels[HeadCategory], e.Category)
		labels[HeadReply] = append(labels[HeadReply], r)
		labels[HeadUrgency] = append(labels[HeadUrgency], e.Urgency)
	}
	specs := []struct {
		name, kind string
		classes    []string
	}{
		{"category", kindSoftmax, db.TriageCategories()},
		{"needsReply", kindSoftmax, []string{"false", "true"}},
		{"urgency", kindOrdinal, []string{"0", "1", "2", "3"}},
	}
	for h, spec := range specs {
		k := len(spec.classes)
		y := labels[h]
		var p HeadParams
		if len(opts.Fixed) > h {
			p = opts.Fixed[h]
		} else {
			p = chooseParams(spec.name, h, spec.kind, xs, y, fold, k, m.Features, opts)
		}
		w, b := fitKind(spec.kind, xs, y, k, penalties(m.Features, p), opts.Iterations)
		head := &Head{Name: spec.name, Kind: spec.kind, Classes: spec.classes, Lambda: p.Lambda, BodyPenalty: p.BodyPenalty, CharPenalty: p.CharPenalty, Temperature: p.Temperature,
			Offsets: p.Offsets, Bias: make([]float32, len(b)), Weights: make([]float32, len(w))}
		for i, v := range w {
			head.Weights[i] = roundWeight(v / p.Temperature)
		}
		for i, v := range b {
			head.Bias[i] = float32((v + offset(p.Offsets, i)) / p.Temperature)
		}
		m.Heads = append(m.Heads, head)
	}
	m.fuse() // a model trained in memory predicts as one read from its file does
	return m
}

// weightDigits are the significant digits a weight keeps: the model file is read by people
// and diffs, and the fifth digit changes no answer, so four keep it half the size.
const weightDigits = 4

// roundWeight rounds a weight to weightDigits significant digits, as the model file holds
// it, so a model trained in memory and the same model read back answer alike.
func roundWeight(v float64) float32 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(float64(float32(v)), 'g', weightDigits, 32), 32)
	return float32(r)
}

// vocabulary returns, sorted, the features that occur in at least minDocs examples.
func vocabulary(examples []Example, minDocs int) []string {
	df := map[string]int{}
	seen := map[string]bool{}
	collect := newVectorizer(func(key []byte) (int32, bool) {
		if !seen[string(key)] {
			seen[string(key)] = true
			df[string(key)]++
		}
		return 0, true // every key counts as known here, so every bigram is seen
	})
	var scratch sparse
	for _, e := range examples {
		clear(seen)
		collect.vector(e.In, &scratch)
	}
	vocab := map[string]int{}
	for k, n := range df {
		if n >= minDocs {
			vocab[k] = n
		}
	}
	return sortedKeys(vocab)
}

// chooseParams picks a head's penalty by cross-validated log loss over folds of whole
// kinds of mail, and its temperature on those out-of-fold predictions.
func chooseParams(name string, head int, kind string, xs []sparse, y, fold []int, k int, features []string, opts TrainOptions) HeadParams {
	best, bestLoss := HeadParams{Temperature: 1}, math.Inf(1)
	var bestZ [][]float64
	grid := headPenalties[head]
	lambdas := opts.Lambdas
	if len(lambdas) == 0 {
		lambdas = grid.lambdas
	}
	for _, lambda := range lambdas {
		for _, body := range grid.body {
			for _, chars := range grid.chars {
				p := HeadParams{Lambda: lambda, BodyPenalty: body, CharPenalty: chars}
				z := crossValidate(kind, xs, y, fold, k, penalties(features, p), opts)
				t, loss := fitTemperature(kind, z, y, k)
				opts.Log("  %-10s lambda=%-7g body %-5g chars %-5g cv log loss %.4f (T=%.3f) cv accuracy %.3f", name, lambda, body, chars, loss, t, accuracy(kind, z, y, k))
				if loss < bestLoss {
					p.Temperature = t
					best, bestLoss, bestZ = p, loss, z
				}
			}
		}
	}
	if kind == kindSoftmax {
		best.Offsets = priorOffsets(name, bestZ, y, k, best.Temperature, opts)
		for n := range bestZ {
			bestZ[n] = shifted(bestZ[n], 1, best.Offsets)
		}
	}
	if head != HeadCategory {
		best.Temperature = sharpen(name, head, kind, bestZ, y, k, best.Temperature, opts)
	}
	opts.Log("  %-10s chose lambda=%g, temperature %.3f, offsets %v", name, best.Lambda, best.Temperature, best.Offsets)
	return best
}

// penalties returns the L2 penalty of each feature's weights under p.
func penalties(features []string, p HeadParams) []float64 {
	pen := make([]float64, len(features))
	for i, f := range features {
		pen[i] = p.Lambda
		switch {
		case strings.HasPrefix(f, "w:") || strings.HasPrefix(f, "b:"):
			pen[i] *= multiplier(p.BodyPenalty)
		case strings.HasPrefix(f, "c:"):
			pen[i] *= multiplier(p.CharPenalty)
		}
	}
	return pen
}

// multiplier is a penalty multiplier of HeadParams, whose zero value means 1.
func multiplier(v float64) float64 {
	if v > 0 {
		return v
	}
	return 1
}

// offset is the shift of class c's logit, 0 when there are none.
func offset(offsets []float64, c int) float64 {
	if c < len(offsets) {
		return offsets[c]
	}
	return 0
}

// shifted returns the logits z, each class shifted by its offset, at temperature t.
func shifted(z []float64, t float64, offsets []float64) []float64 {
	out := make([]float64, len(z))
	for c := range z {
		out[c] = (z[c] + offset(offsets, c)) / t
	}
	return out
}

// priorOffsets are per-class shifts of a softmax head's logits (raw, before temperature
// t) that minimize the out-of-fold log loss at t: the class priors of mail of unseen
// kinds, which differ from those the in-sample bias learns. A shift of needsReply chosen
// by its answers decided and right instead moved by as much as 0.2 point with the
// features and changed sign between them (noise); the log loss gives a stable one.
// Gradient steps on a handful of numbers cost nothing beside training.
func priorOffsets(name string, z [][]float64, y []int, k int, t float64, opts TrainOptions) []float64 {
	off := make([]float64, k)
	loss := func() float64 {
		sum := 0.0
		for i := range z {
			p := shifted(z[i], t, off)
			softmax(p)
			sum -= math.Log(math.Max(p[y[i]], 1e-12))
		}
		return sum / float64(len(z))
	}
	before := loss()
	g := make([]float64, k)
	for step := 0; step < 500; step++ {
		clear(g)
		for i := range z {
			p := shifted(z[i], t, off)
			softmax(p)
			p[y[i]] -= 1
			for c := range g {
				g[c] += p[c] / float64(len(z))
			}
		}
		for c := range off {
			off[c] -= 1.0 * g[c]
		}
	}
	mean := 0.0
	for _, v := range off {
		mean += v / float64(k)
	}
	for c := range off {
		off[c] = roundOffset(off[c] - mean)
	}
	opts.Log("  %-10s prior offsets %v: cv log loss %.4f (%.4f without), accuracy %.4f (%.4f without)", name, off, loss(), before,
		accuracyShifted(z, y, t, off), accuracyShifted(z, y, t, nil))
	return off
}

// accuracyShifted is the share of z whose shifted logits' argmax is the label.
func accuracyShifted(z [][]float64, y []int, t float64, off []float64) float64 {
	ok := 0
	for i := range z {
		if argmax(shifted(z[i], t, off)) == y[i] {
			ok++
		}
	}
	return float64(ok) / float64(len(z))
}

// roundOffset keeps three decimals of an offset, as the model file shows it.
func roundOffset(v float64) float64 { return math.Round(v*1000) / 1000 }

// sharpen lowers the temperature of a head whose value the API leaves null when it is
// unsure (needsReply, urgency: API-NOTES section 8) for as long as that pays: a null costs
// a user who filters by the value as much as a wrong answer, so it returns the highest
// temperature, from t (the calibrated one) down, whose out-of-fold answers are decided and
// right within half a point of the best any temperature gives. It costs calibration, which
// scripts/triage-eval.sh reports.
func sharpen(name string, head int, kind string, z [][]float64, y []int, k int, t float64, opts TrainOptions) float64 {
	scales := []float64{1, 0.8, 0.65, 0.5, 0.4, 0.3, 0.22, 0.16, 0.12, 0.09, 0.07, 0.05}
	acc := make([]float64, len(scales))
	best := 0.0
	for i, sc := range scales {
		right := 0
		for n := range z {
			if decidedRight(head, probsAt(kind, z[n], t*sc, k), y[n]) {
				right++
			}
		}
		acc[i] = float64(right) / float64(len(z))
		best = max(best, acc[i])
		opts.Log("  %-10s temperature %.3f: %.3f decided and right", name, t*sc, acc[i])
	}
	for i, sc := range scales {
		if acc[i] >= best-0.005 {
			return t * sc
		}
	}
	return t
}

// decidedRight reports whether distribution p of a head gives the value that y, its
// label, calls right, with the thresholds of Derive: needsReply neither uncertain nor
// wrong; urgency named and within one level of the label.
func decidedRight(head int, p []float64, y int) bool {
	if head == HeadReply {
		v := replyValue(p[1])
		return v != nil && *v == (y == 1)
	}
	_, level, _, decided := urgencyValue(p)
	return decided && level-y <= 1 && y-level <= 1
}

func fitKind(kind string, xs []sparse, y []int, k int, pen []float64, iters int) ([]float64, []float64) {
	if kind == kindOrdinal {
		return fitOrdinal(xs, y, k, pen, iters)
	}
	return fit(xs, y, k, pen, iters)
}

// rawScores are what temperature scaling divides: the logits of a softmax head, the
// distances t_k - s of an ordinal one.
func rawScores(kind string, x *sparse, w, b []float64, k int) []float64 {
	if kind == kindOrdinal {
		s := dot(x, w)
		z := make([]float64, len(b))
		for c := range b {
			z[c] = b[c] - s
		}
		return z
	}
	return logits(x, w, b, k)
}

// probsAt turns raw scores at temperature t into the class distribution.
func probsAt(kind string, z []float64, t float64, k int) []float64 {
	p := make([]float64, k)
	if kind == kindOrdinal {
		prev := 0.0
		for c := 0; c < k-1; c++ {
			cum := sigmoid(z[c] / t)
			p[c] = math.Max(cum-prev, 0)
			prev = math.Max(cum, prev)
		}
		p[k-1] = 1 - prev
		return p
	}
	for c := range p {
		p[c] = z[c] / t
	}
	softmax(p)
	return p
}

func dot(x *sparse, w []float64) float64 {
	s := 0.0
	for n, i := range x.idx {
		s += float64(float64(x.val[n]) * w[i])
	}
	return s
}

// crossValidate returns out-of-fold logits: example i is scored by a model trained
// without its fold (fold[i]). Folds train in parallel; each is deterministic.
func crossValidate(kind string, xs []sparse, y, fold []int, k int, pen []float64, opts TrainOptions) [][]float64 {
	out := make([][]float64, len(xs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for f := 0; f < opts.Folds; f++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var trX []sparse
			var trY []int
			for i := range xs {
				if fold[i] != f {
					trX = append(trX, xs[i])
					trY = append(trY, y[i])
				}
			}
			w, b := fitKind(kind, trX, trY, k, pen, opts.Iterations)
			for i := range xs {
				if fold[i] == f {
					out[i] = rawScores(kind, &xs[i], w, b, k)
				}
			}
		}()
	}
	wg.Wait()
	return out
}

func logits(x *sparse, w, b []float64, k int) []float64 {
	z := slices.Clone(b)
	for n, i := range x.idx {
		v := float64(x.val[n])
		row := w[int(i)*k : int(i)*k+k]
		for c := range z {
			z[c] += float64(v * row[c])
		}
	}
	return z
}

// fit minimizes the mean cross-entropy plus lambda/2 times the squared weights (bias not
// penalized) with full-batch Adam. Sums run in example order, so the result is the same
// on every run.
func fit(xs []sparse, y []int, k int, pen []float64, iters int) ([]float64, []float64) {
	w := make([]float64, len(pen)*k)
	b := make([]float64, k)
	gw := make([]float64, len(w))
	gb := make([]float64, k)
	mw, vw := make([]float64, len(w)), make([]float64, len(w))
	mb, vb := make([]float64, k), make([]float64, k)
	inv := 1 / float64(len(xs))
	p := make([]float64, k)
	for t := 1; t <= iters; t++ {
		for i := range gw {
			gw[i] = float64(pen[i/k] * w[i])
		}
		clear(gb)
		for n := range xs {
			x := &xs[n]
			copy(p, b)
			for j, i := range x.idx {
				v := float64(x.val[j])
				row := w[int(i)*k : int(i)*k+k]
				for c := range p {
					p[c] += float64(v * row[c])
				}
			}
			softmax(p)
			p[y[n]] -= 1
			for c := range p {
				p[c] *= inv
				gb[c] += p[c]
			}
			for j, i := range x.idx {
				v := float64(x.val[j])
				row := gw[int(i)*k : int(i)*k+k]
				for c := range p {
					row[c] += float64(v * p[c])
				}
			}
		}
		adam(t, w, gw, mw, vw)
		adam(t, b, gb, mb, vb)
	}
	return w, b
}

// adam takes step t (1-based) of the Adam optimizer on x with gradient g and moment
// estimates m and v. Explicit conversions keep each product rounded on its own, so no
// platform fuses them (FMA) and the result is the same everywhere.
func adam(t int, x, g, m, v []float64) {
	const (
		lr    = 0.05
		beta1 = 0.9
		beta2 = 0.999
		eps   = 1e-8
	)
	c1 := 1 - math.Pow(beta1, float64(t))
	c2 := 1 - math.Pow(beta2, float64(t))
	for i := range x {
		m[i] = float64(beta1*m[i]) + float64((1-beta1)*g[i])
		v[i] = float64(beta2*v[i]) + float64(float64((1-beta2)*g[i])*g[i])
		x[i] -= float64(lr*(m[i]/c1)) / (math.Sqrt(v[i]/c2) + eps)
	}
}

// fitOrdinal minimizes the mean negative log likelihood of the proportional-odds model,
// P(y <= c) = sigmoid(t_c - w.x), plus lambda/2 times the squared weights, with full-batch
// Adam. The cut points are kept in order by learning t_0 and the logs of the gaps.
func fitOrdinal(xs []sparse, y []int, k int, pen []float64, iters int) ([]float64, []float64) {
	nf := len(pen)
	w := make([]float64, nf)
	// params: t_0, then log gaps; start evenly spaced
	th := make([]float64, k-1)
	th[0] = -1
	for c := 1; c < k-1; c++ {
		th[c] = 0 // log(1): gaps of 1
	}
	gw := make([]float64, nf)
	gth := make([]float64, k-1)
	mw, vw := make([]float64, nf), make([]float64, nf)
	mt, vt := make([]float64, k-1), make([]float64, k-1)
	inv := 1 / float64(len(xs))
	cuts := make([]float64, k-1)
	gcut := make([]float64, k-1)
	for t := 1; t <= iters; t++ {
		for i := range gw {
			gw[i] = float64(pen[i] * w[i])
		}
		clear(gcut)
		cuts[0] = th[0]
		for c := 1; c < k-1; c++ {
			cuts[c] = cuts[c-1] + math.Exp(th[c])
		}
		for n := range xs {
			x := &xs[n]
			s := dot(x, w)
			c := y[n]
			var fHi, fLo, pHi, pLo float64 = 0, 0, 1, 0
			if c < k-1 {
				pHi = sigmoid(cuts[c] - s)
				fHi = pHi * (1 - pHi)
			}
			if c > 0 {
				pLo = sigmoid(cuts[c-1] - s)
				fLo = pLo * (1 - pLo)
			}
			p := math.Max(pHi-pLo, 1e-12)
			gs := (fHi - fLo) / p * inv
			if c < k-1 {
				gcut[c] -= fHi / p * inv
			}
			if c > 0 {
				gcut[c-1] += fLo / p * inv
			}
			for j, i := range x.idx {
				gw[i] += float64(float64(x.val[j]) * gs)
			}
		}
		// chain rule from the cut points to t_0 and the log gaps
		clear(gth)
		for c := 0; c < k-1; c++ {
			gth[0] += gcut[c]
		}
		for c := 1; c < k-1; c++ {
			tail := 0.0
			for d := c; d < k-1; d++ {
				tail += gcut[d]
			}
			gth[c] = tail * math.Exp(th[c])
		}
		adam(t, w, gw, mw, vw)
		adam(t, th, gth, mt, vt)
	}
	cuts[0] = th[0]
	for c := 1; c < k-1; c++ {
		cuts[c] = cuts[c-1] + math.Exp(th[c])
	}
	return w, cuts
}

// fitTemperature finds T in [0.05, 20] minimizing the log loss of the distributions at
// temperature T, by golden-section search on log T (the loss is unimodal in T).
func fitTemperature(kind string, z [][]float64, y []int, k int) (float64, float64) {
	loss := func(t float64) float64 {
		sum := 0.0
		for n := range z {
			p := probsAt(kind, z[n], t, k)
			sum -= math.Log(math.Max(p[y[n]], 1e-12))
		}
		return sum / float64(len(z))
	}
	lo, hi := math.Log(0.05), math.Log(20)
	g := (math.Sqrt(5) - 1) / 2
	a, b := hi-g*(hi-lo), lo+g*(hi-lo)
	fa, fb := loss(math.Exp(a)), loss(math.Exp(b))
	for i := 0; i < 60; i++ {
		if fa < fb {
			hi, b, fb = b, a, fa
			a = hi - g*(hi-lo)
			fa = loss(math.Exp(a))
		} else {
			lo, a, fa = a, b, fb
			b = lo + g*(hi-lo)
			fb = loss(math.Exp(b))
		}
	}
	t := math.Exp((lo + hi) / 2)
	return t, loss(t)
}

func accuracy(kind string, z [][]float64, y []int, k int) float64 {
	ok := 0
	for n := range z {
		if argmax(probsAt(kind, z[n], 1, k)) == y[n] {
			ok++
		}
	}
	return float64(ok) / float64(len(z))
}

func argmax(v []float64) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}
