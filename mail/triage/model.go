package triage

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// ModelName names the built-in model and its version. A retrained model with different
// features or corpus gets a new version.
const ModelName = "inboxd-lr-5"

//go:generate go run ../../fixtures/triage/gen -out ../../fixtures/triage/corpus.jsonl
//go:generate go run -tags "sqlite_omit_load_extension osusergo netgo" ./train -corpus ../../fixtures/triage/corpus.jsonl -written ../../fixtures/triage/written/*.jsonl -out model.json

//go:embed model.json
var embeddedModel []byte

// Model is a trained classifier: a vocabulary of features and one softmax head per
// question. Each head's weights are already divided by its calibration temperature.
type Model struct {
	Name     string   `json:"name"`
	Features []string `json:"features"`
	Heads    []*Head  `json:"heads"` // category, needsReply, urgency

	table     []slot    // Features by hash (buildIndex)
	fused     []float32 // every head's weights, feature by feature (fuse)
	filter    []uint64  // a Bloom filter over Features
	seed      maphash.Seed
	wordGrams []int32 // the character n-grams of the vocabulary's words (refWordGrams)
	// vocabulary is len(Features) of the model a serving one was made of (serving).
	vocabulary int
}

// Head is one multinomial logistic regression: Weights holds, for each feature in
// vocabulary order, one weight per class.
//
// An ordinal head (urgency: its classes are ordered levels) is a proportional-odds model
// instead: one weight per feature gives a score s, and Bias holds the cut points t0 < t1 <
// t2, so that P(level <= k) = sigmoid(t_k - s). Its distributions have one peak, which suits
// reading the expected level as the urgency score.
type Head struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"` // softmax | ordinal
	Classes []string `json:"classes"`
	Lambda  float64  `json:"lambda"` // L2 penalty chosen by cross-validation
	// BodyPenalty multiplies Lambda for the words and word pairs of the sender's own text
	// (HeadParams); absent means 1.
	BodyPenalty float64 `json:"bodyPenalty,omitempty"`
	// CharPenalty multiplies Lambda for the character n-grams (HeadParams); absent means 1.
	CharPenalty float64 `json:"charPenalty,omitempty"`
	Temperature float64 `json:"temperature"` // calibration, fitted on out-of-fold predictions
	// Offsets are the per-class shifts of the logits chosen on out-of-fold predictions
	// (HeadParams), already added to Bias; kept so that a retraining can apply them again.
	Offsets []float64 `json:"offsets,omitempty"`
	Bias    []float32 `json:"bias"`
	Weights []float32 `json:"weights"`
}

// Head names, in the order of Model.Heads.
const (
	HeadCategory = iota
	HeadReply
	HeadUrgency
)

// LoadModel parses a model file.
func LoadModel(b []byte) (*Model, error) {
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("triage: model: %w", err)
	}
	if len(m.Heads) != 3 || len(m.Heads[HeadCategory].Classes) != len(db.TriageCategories()) || len(m.Heads[HeadReply].Classes) != 2 ||
		len(m.Heads[HeadUrgency].Classes) != len(db.UrgencyLevels()) {
		return nil, fmt.Errorf("triage: model %s: heads do not match the triage result", m.Name)
	}
	for _, h := range m.Heads {
		per, bias := len(h.Classes), len(h.Classes)
		if h.Kind == kindOrdinal {
			per, bias = 1, len(h.Classes)-1
		} else if h.Kind != kindSoftmax {
			return nil, fmt.Errorf("triage: model %s: head %s has unknown kind %q", m.Name, h.Name, h.Kind)
		}
		if len(h.Weights) != len(m.Features)*per || len(h.Bias) != bias {
			return nil, fmt.Errorf("triage: model %s: head %s has %d weights for %d features", m.Name, h.Name, len(h.Weights), len(m.Features))
		}
	}
	m.buildIndex()
	m.fuse()
	return &m, nil
}

// buildIndex maps features to their positions: an open-addressing table keyed by each
// feature's hash, behind a Bloom filter of about 8 bits a feature (two probes from the same
// hash). Most lookups miss (nearly every bigram of a message, its rarer words and many of
// their character n-grams), and the filter, a few kilobytes that stay in the CPU's cache,
// answers most misses; a hit then probes the table with the hash already made, so a key
// is hashed once (a map would hash it again: the map's lookups were ~3.5% of the server's
// CPU on a stream of SMTP mail, BENCHMARKS.md). A slot's 64-bit hash stands for its
// feature: the seed is chosen so that no two features share one, and a key that is not a
// feature matches a slot only if its hash equals that feature's, about one lookup in 2^64
// (comparing the text too cost two more reads of memory far apart per found feature).
func (m *Model) buildIndex() {
	words := 1
	for words*64 < 8*len(m.Features) {
		words *= 2
	}
	m.filter = make([]uint64, words)
	size := 1
	for size < 2*len(m.Features) {
		size *= 2
	}
	m.table = make([]slot, size)
	for i := range m.table {
		m.table[i].idx = -1
	}
	m.seed = m.distinctSeed()
	for i, f := range m.Features {
		h := maphash.String(m.seed, f)
		a, b := m.probes(h)
		m.filter[a>>6] |= 1 << (a & 63)
		m.filter[b>>6] |= 1 << (b & 63)
		j := h & uint64(size-1)
		for m.table[j].idx >= 0 {
			j = (j + 1) & uint64(size-1)
		}
		m.table[j] = slot{hash: h, idx: int32(i)}
	}
	m.refWordGrams(newGramTable(m.Features, newVectorizer(m.lookup).gramsOf))
}

// refWordGrams keeps the character n-grams of the vocabulary's words (t) in wordGrams and
// puts where each word's are in its slot of the table, so that the lookup that finds a
// word finds them too: a word the model knows then costs one read of the table and one
// of its n-grams (an array by word in between was a third, missed in the cache as often).
// A vocabulary too large to say where in a slot's 32 bits keeps them nowhere, and its
// vectorizers look the n-grams up instead (the same features).
func (m *Model) refWordGrams(t *gramTable) {
	if len(t.grams) >= 1<<23 {
		return
	}
	mask := uint64(len(m.table) - 1)
	for k := 0; k+1 < len(t.start); k++ {
		start, n := t.start[k], t.start[k+1]-t.start[k]
		if n >= 1<<8 {
			return
		}
		h := maphash.String(m.seed, m.Features[int(t.first)+k])
		j := h & mask
		for m.table[j].hash != h {
			j = (j + 1) & mask
		}
		m.table[j].grams = gramRef(1<<31 | uint32(start)<<8 | uint32(n))
	}
	m.wordGrams = t.grams
}

// distinctSeed returns a hash seed under which every feature's hash is its own.
func (m *Model) distinctSeed() maphash.Seed {
	for {
		seed := maphash.MakeSeed()
		seen := make(map[uint64]struct{}, len(m.Features))
		for _, f := range m.Features {
			seen[maphash.String(seed, f)] = struct{}{}
		}
		if len(seen) == len(m.Features) {
			return seed
		}
	}
}

// serving returns the model as a Builtin reads it: the same tables, without the
// vocabulary's text (Features) and each head's weights (Head.Weights), which only loading,
// training and Encode read; prediction reads fused. Held by a server, they were ~6 MB of
// its live heap, 86,000 strings among it, that every collection marked and that brought
// the next one nearer under the memory limit (BENCHMARKS.md, "The model's memory").
func (m *Model) serving() *Model {
	s := &Model{Name: m.Name, table: m.table, fused: m.fused, filter: m.filter, seed: m.seed,
		wordGrams: m.wordGrams, vocabulary: m.vocabularySize()}
	for _, h := range m.Heads {
		c := *h
		c.Weights, c.Offsets = nil, nil
		s.Heads = append(s.Heads, &c)
	}
	return s
}

// vocabularySize is how many features the model has.
func (m *Model) vocabularySize() int {
	if m.Features == nil {
		return m.vocabulary
	}
	return len(m.Features)
}

// newVectorizer returns a vectorizer over the model's vocabulary that looks up the
// character n-grams of a word only when neither the vocabulary's table nor seen has them
// (grams.go). Its count array has a slot for every feature from the start.
func (m *Model) newVectorizer(seen *gramCache) *vectorizer {
	v := newVectorizer(m.lookup)
	v.cnt = make([]float32, m.vocabularySize())
	v.seen = seen
	if m.wordGrams != nil {
		v.lookupWord = m.lookupWord
	}
	return v
}

// slot is an entry of the feature table: a feature's hash and position, -1 when empty,
// and for a word feature where its character n-grams are (refWordGrams).
type slot struct {
	hash  uint64
	idx   int32
	grams gramRef
}

// gramRef says where a word's n-gram features are in Model.wordGrams: a set top bit, then
// the first's position (23 bits) and their number (8 bits).
type gramRef uint32

func (r gramRef) of(all []int32) ([]int32, bool) {
	if r == 0 {
		return nil, false
	}
	start := int(r>>8) & (1<<23 - 1)
	return all[start : start+int(r&0xff)], true
}

// probes are the two filter bits of a key's hash.
func (m *Model) probes(h uint64) (uint64, uint64) {
	mask := uint64(len(m.filter)*64 - 1)
	return h & mask, (h >> 32) & mask
}

func (m *Model) lookup(key []byte) (int32, bool) {
	s := m.find(key)
	return s.idx, s.idx >= 0
}

// lookupWord returns the feature of key ("w:" and a word), and its word's n-gram features
// when the model keeps them (refWordGrams).
func (m *Model) lookupWord(key []byte) (feature int32, grams []int32, known, gramsKnown bool) {
	s := m.find(key)
	grams, gramsKnown = s.grams.of(m.wordGrams)
	return s.idx, grams, s.idx >= 0, gramsKnown
}

// find returns key's slot, or one whose idx is -1.
func (m *Model) find(key []byte) slot {
	h := maphash.Bytes(m.seed, key)
	a, b := m.probes(h)
	if m.filter[a>>6]&(1<<(a&63)) == 0 || m.filter[b>>6]&(1<<(b&63)) == 0 {
		return slot{idx: -1}
	}
	mask := uint64(len(m.table) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		s := m.table[j]
		if s.idx < 0 || s.hash == h { // buildIndex made every feature's hash its own
			return s
		}
	}
}

// Kinds of head.
const (
	kindSoftmax = "softmax"
	kindOrdinal = "ordinal"
)

// predict returns the class distribution of head h for vector x.
func (h *Head) predict(x *sparse, out []float64) {
	per := h.width()
	h.begin(out)
	for n, i := range x.idx {
		addRow(out, float64(x.val[n]), h.Weights[int(i)*per:int(i)*per+per])
	}
	h.end(out)
}

// width is how many weights the head has per feature: one per class, or one score for an
// ordinal head.
func (h *Head) width() int {
	if h.Kind == kindOrdinal {
		return 1
	}
	return len(h.Classes)
}

// begin starts out as the sums begin: the biases, or an ordinal head's score of 0.
func (h *Head) begin(out []float64) {
	if h.Kind == kindOrdinal {
		out[0] = 0
		return
	}
	for c := range h.Classes {
		out[c] = float64(h.Bias[c])
	}
}

// addRow adds one feature's value times its weights to the sums.
func addRow(out []float64, v float64, row []float32) {
	for c, w := range row {
		out[c] += float64(v * float64(w))
	}
}

// end turns the sums into the class distribution: a softmax, or an ordinal head's levels
// from its score and cut points.
func (h *Head) end(out []float64) {
	k := len(h.Classes)
	if h.Kind != kindOrdinal {
		softmax(out[:k])
		return
	}
	s, prev := out[0], 0.0
	for c := 0; c < k-1; c++ {
		cum := sigmoid(float64(h.Bias[c]) - s)
		out[c] = math.Max(cum-prev, 0)
		prev = math.Max(cum, prev)
	}
	out[k-1] = 1 - prev
}

// predictAll gives every head's distribution for x (out[h] for Heads[h]) in one pass over
// the features, adding each feature's row of fused to one row of sums laid out as fused
// is: each sum gets the same terms in the same order as in each head's predict, so the
// numbers are the same. (Adding through each head's slice of out cost a head's kind read
// and a slice made per head and feature.)
func (m *Model) predictAll(x *sparse, out [][]float64) {
	var buf [16]float64
	sums := buf[:0]
	for _, h := range m.Heads {
		start := len(sums)
		sums = append(sums, make([]float64, h.width())...)
		h.begin(sums[start:])
	}
	w := len(sums)
	for n, i := range x.idx {
		v := float64(x.val[n])
		row := m.fused[int(i)*w : int(i)*w+w]
		s := sums[:len(row)]
		for c, wt := range row {
			s[c] += float64(v * float64(wt))
		}
	}
	off := 0
	for hi, h := range m.Heads {
		per := h.width()
		copy(out[hi], sums[off:off+per])
		off += per
		h.end(out[hi])
	}
}

// fuse lays out every head's weights feature by feature (fused): a message's features are
// scattered over the vocabulary, and each costs a cache miss per head when the heads keep
// their weights apart (the built-in model's reads of memory were most of its time in a
// server busy with everything else, BENCHMARKS.md).
func (m *Model) fuse() {
	width := 0
	for _, h := range m.Heads {
		width += h.width()
	}
	m.fused = make([]float32, 0, len(m.Features)*width)
	for i := range m.Features {
		for _, h := range m.Heads {
			per := h.width()
			m.fused = append(m.fused, h.Weights[i*per:i*per+per]...)
		}
	}
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

func softmax(z []float64) {
	m := math.Inf(-1)
	for _, v := range z {
		m = math.Max(m, v)
	}
	sum := 0.0
	for i, v := range z {
		z[i] = math.Exp(v - m)
		sum += z[i]
	}
	for i := range z {
		z[i] /= sum
	}
}

// Encode writes the model as JSON: one line per head weight row is too long, so weights
// stay flat; floats use the shortest form that reads back to the same float32, so the
// same training run writes the same bytes.
func (m *Model) Encode() ([]byte, error) {
	var b strings.Builder
	b.WriteString("{\n")
	name, _ := json.Marshal(m.Name)
	fmt.Fprintf(&b, "  \"name\": %s,\n  \"features\": [", name)
	for i, f := range m.Features {
		if i > 0 {
			b.WriteString(",")
		}
		if i%8 == 0 {
			b.WriteString("\n    ")
		}
		q, _ := json.Marshal(f)
		b.Write(q)
	}
	b.WriteString("\n  ],\n  \"heads\": [")
	for hi, h := range m.Heads {
		if hi > 0 {
			b.WriteString(",")
		}
		hn, _ := json.Marshal(h.Name)
		cl, _ := json.Marshal(h.Classes)
		fmt.Fprintf(&b, "\n    {\n      \"name\": %s,\n      \"kind\": %q,\n      \"classes\": %s,\n      \"lambda\": %s,\n      \"temperature\": %s,\n",
			hn, h.Kind, cl, strconv.FormatFloat(h.Lambda, 'g', -1, 64), strconv.FormatFloat(h.Temperature, 'g', 6, 64))
		writeMultiplier(&b, "bodyPenalty", h.BodyPenalty)
		writeMultiplier(&b, "charPenalty", h.CharPenalty)
		if len(h.Offsets) > 0 {
			fmt.Fprintf(&b, "      \"offsets\": %s,\n", float64s(h.Offsets))
		}
		fmt.Fprintf(&b, "      \"bias\": %s,\n      \"weights\": [", floats(h.Bias))
		k := len(h.Classes) // one line per feature; an ordinal head has one weight each, eight to a line
		if h.Kind == kindOrdinal {
			k = 8
		}
		for i := 0; i < len(h.Weights); i += k {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n        ")
			b.WriteString(strings.Trim(floats(h.Weights[i:min(i+k, len(h.Weights))]), "[]"))
		}
		b.WriteString("\n      ]\n    }")
	}
	b.WriteString("\n  ]\n}\n")
	return []byte(b.String()), nil
}

// writeMultiplier writes a head's penalty multiplier as a field of its object, unless it
// is the default (absent or 1), so older model files read the same.
func writeMultiplier(b *strings.Builder, name string, v float64) {
	if v != 0 && v != 1 {
		fmt.Fprintf(b, "      %q: %s,\n", name, strconv.FormatFloat(v, 'g', -1, 64))
	}
}

func float64s(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func floats(v []float32) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// sortedKeys returns the keys of a set in order.
func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
