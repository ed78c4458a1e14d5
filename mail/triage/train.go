package triage

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Example is one labelled message of the corpus.
type Example struct {
	ID       string
	Split    string // train | test
	Scenario string
	In       Input
	Category int  // index in db.TriageCategories
	Reply    bool // needs a reply
	Urgency  int  // 0-3
}

// corpusLine is the JSON-lines format of fixtures/triage/corpus.jsonl.
type corpusLine struct {
	ID         string   `json:"id"`
	Split      string   `json:"split"`
	Scenario   string   `json:"scenario"`
	From       string   `json:"from"`
	To         []string `json:"to"`
	Subject    string   `json:"subject"`
	ReceivedAt string   `json:"receivedAt"`
	Text       string   `json:"text"`
	Labels     struct {
		Category   string `json:"category"`
		NeedsReply bool   `json:"needsReply"`
		Urgency    int    `json:"urgency"`
	} `json:"labels"`
}

// LoadCorpus reads a labelled corpus file (JSON lines). Each message goes through
// NewInput, as live mail does.
func LoadCorpus(path string) ([]Example, error) {
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
		out = append(out, Example{ID: l.ID, Split: l.Split, Scenario: l.Scenario,
			In:       NewInput(l.From, l.To, nil, l.Subject, at, l.Text),
			Category: cat, Reply: l.Labels.NeedsReply, Urgency: l.Labels.Urgency})
	}
	return out, sc.Err()
}

// TrainOptions tune training; the zero value means the defaults.
type TrainOptions struct {
	MinDocs    int       // a feature must occur in this many training messages (default 2)
	Lambdas    []float64 // L2 penalties to choose from by cross-validation
	Folds      int       // cross-validation folds (default 5)
	Iterations int       // full-batch optimizer steps (default 300)
	Log        func(format string, args ...any)
}

func (o *TrainOptions) defaults() {
	if o.MinDocs == 0 {
		o.MinDocs = 2
	}
	if len(o.Lambdas) == 0 {
		o.Lambdas = []float64{3e-5, 1e-4, 3e-4, 1e-3}
	}
	if o.Folds == 0 {
		o.Folds = 5
	}
	if o.Iterations == 0 {
		o.Iterations = 300
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// Train fits the three heads on examples. For each head it picks the L2 penalty with the
// lowest cross-validated log loss, fits a temperature on the out-of-fold predictions
// (calibration), then trains on all examples and divides the weights by the temperature.
// Training is deterministic: the same examples give the same model, bit for bit.
func Train(examples []Example, opts TrainOptions) *Model {
	opts.defaults()
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
		if n >= opts.MinDocs {
			vocab[k] = n
		}
	}
	m := &Model{Name: ModelName, Features: sortedKeys(vocab)}
	m.buildIndex()
	opts.Log("vocabulary: %d features (of %d seen) from %d messages", len(m.Features), len(df), len(examples))
	vec := newVectorizer(m.lookup)
	xs := make([]sparse, len(examples))
	for i, e := range examples {
		vec.vector(e.In, &xs[i])
		xs[i].idx = slices.Clone(xs[i].idx)
		xs[i].val = slices.Clone(xs[i].val)
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
		bestLoss, bestLambda, bestT := math.Inf(1), 0.0, 1.0
		for _, lambda := range opts.Lambdas {
			z := crossValidate(spec.kind, xs, y, k, len(m.Features), lambda, opts)
			t, loss := fitTemperature(spec.kind, z, y, k)
			acc := accuracy(spec.kind, z, y, k)
			opts.Log("  %-10s lambda=%-7g cv log loss %.4f (T=%.3f) cv accuracy %.3f", spec.name, lambda, loss, t, acc)
			if loss < bestLoss {
				bestLoss, bestLambda, bestT = loss, lambda, t
			}
		}
		w, b := fitKind(spec.kind, xs, y, k, len(m.Features), bestLambda, opts.Iterations)
		head := &Head{Name: spec.name, Kind: spec.kind, Classes: spec.classes, Lambda: bestLambda, Temperature: bestT,
			Bias: make([]float32, len(b)), Weights: make([]float32, len(w))}
		for i, v := range w {
			head.Weights[i] = float32(v / bestT)
		}
		for i, v := range b {
			head.Bias[i] = float32(v / bestT)
		}
		opts.Log("  %-10s chose lambda=%g, temperature %.3f", spec.name, bestLambda, bestT)
		m.Heads = append(m.Heads, head)
	}
	return m
}

func fitKind(kind string, xs []sparse, y []int, k, nf int, lambda float64, iters int) ([]float64, []float64) {
	if kind == kindOrdinal {
		return fitOrdinal(xs, y, k, nf, lambda, iters)
	}
	return fit(xs, y, k, nf, lambda, iters)
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
// without its fold (i mod folds). Folds train in parallel; each is deterministic.
func crossValidate(kind string, xs []sparse, y []int, k, nf int, lambda float64, opts TrainOptions) [][]float64 {
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
				if i%opts.Folds != f {
					trX = append(trX, xs[i])
					trY = append(trY, y[i])
				}
			}
			w, b := fitKind(kind, trX, trY, k, nf, lambda, opts.Iterations)
			for i := range xs {
				if i%opts.Folds == f {
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
func fit(xs []sparse, y []int, k, nf int, lambda float64, iters int) ([]float64, []float64) {
	w := make([]float64, nf*k)
	b := make([]float64, k)
	gw := make([]float64, len(w))
	gb := make([]float64, k)
	mw, vw := make([]float64, len(w)), make([]float64, len(w))
	mb, vb := make([]float64, k), make([]float64, k)
	inv := 1 / float64(len(xs))
	p := make([]float64, k)
	for t := 1; t <= iters; t++ {
		for i := range gw {
			gw[i] = float64(lambda * w[i])
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
func fitOrdinal(xs []sparse, y []int, k, nf int, lambda float64, iters int) ([]float64, []float64) {
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
			gw[i] = float64(lambda * w[i])
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
