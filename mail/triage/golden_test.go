package triage

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/mail"
)

// goldenDigests are the SHA-256 digests of the embedded model's answers (every
// probability's float64 bits and the token count) for the sets of goldenSets, as main's code
// gave them at df9b1c4, before the model's per-message work was cut (branch s7-tri). Code
// that only makes the model faster must leave every answer bit for bit as it was; a new
// model or new features change them, and then these are made again from the new model.
var goldenDigests = map[string]string{
	"fixtures": "a61836c21142f478c49a2325ef05e2f54564d8658f1d8a6479d1606b48fc45f3",
	"mangled":  "1a08734238661dc3cad07d7251d52789e17b4abc9242ad1e940acecedca0481a",
	"zipf":     "6546bb391e73f7a9ef8a70ec54a02c262ff7b76eb3025348a017ec566cb0c9d1",
}

// TestPredictionsStayBitIdentical: the built-in model answers every message of a large,
// varied set exactly as before (goldenDigests), read once by one goroutine with a cold
// n-gram cache, and a quarter of it again by four goroutines at once with a warm one.
func TestPredictionsStayBitIdentical(t *testing.T) {
	c := qt.New(t)
	b, err := NewBuiltin()
	c.Assert(err, qt.IsNil)
	for _, set := range goldenSets(c) {
		cold := make([]Scores, len(set.inputs))
		for i, in := range set.inputs {
			cold[i] = b.Predict(in)
		}
		// Again, a quarter of them, by four goroutines at once through the warm cache.
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := g; i < len(set.inputs); i += 16 {
					c.Check(b.Predict(set.inputs[i]), qt.Equals, cold[i], qt.Commentf("%s: message %d, warm", set.name, i))
				}
			})
		}
		wg.Wait()
		c.Check(digest(cold), qt.Equals, goldenDigests[set.name], qt.Commentf("%s: %d messages", set.name, len(set.inputs)))
	}
}

type goldenSet struct {
	name   string
	inputs []Input
}

// goldenSets are the messages of TestPredictionsStayBitIdentical: every committed corpus
// and test set; each of them again with its text and subject strewn with what tokenizing
// treats specially (other scripts, case that lowercases oddly, digits of other scripts,
// currency signs, contractions, hashes, invalid UTF-8) and cut or doubled; and 2,000
// messages of made-up words in the SMTP benchmark's proportions (zipfMail).
func goldenSets(c *qt.C) []goldenSet {
	files, err := filepath.Glob("../../fixtures/triage/*.jsonl")
	c.Assert(err, qt.IsNil)
	more, err := filepath.Glob("../../fixtures/triage/written/*.jsonl")
	c.Assert(err, qt.IsNil)
	files = append(files, more...)
	sort.Strings(files)
	var fixtures []Input
	for _, f := range files {
		ex, err := LoadCorpus(f, mail.HTMLToText)
		c.Assert(err, qt.IsNil)
		for _, e := range ex {
			fixtures = append(fixtures, e.In)
		}
	}
	c.Assert(len(fixtures) > 5000, qt.IsTrue)
	return []goldenSet{{"fixtures", fixtures}, {"mangled", mangled(fixtures)}, {"zipf", zipfMail(2000, 40000)}}
}

// oddPieces are strings the tokenizer has rules for, or that Unicode makes hard.
var oddPieces = []string{
	"İstanbul", "STRASSE", "straße", "ǅemal", "ﬁle", "ΣΟΦΟΣ", "Ωmega", "١٢٣٤", "Ⅻ", "x²", "½", "e\u0301te", "café",
	"naïve", "日本語のメール", "한국어", "🙂", "don’t", "I'M", "we'd", "'quoted'", "$1,200.50", "€30", "£5", "¥800", "₹90",
	"INV-2026-0412", "a1b2c3", "0x7f3a", "d41d8cd98f00b204e9800998ecf8427e", strings.Repeat("z", 29), strings.Repeat("ü", 15),
	strings.Repeat("k", 31), "\xff\xfe", "a\x00b", "Re:", "> quoted line", "--", "Sent from my phone", "On Mon, 1 Jun 2026 Ana wrote:",
	"could you", "???", "!!!", "https://x.example/a?b=c", "\t", "\r", "-", "_", "ß", "ŉ", "ǰ", "ᾈ", "K",
}

// mangled returns each input again with oddPieces strewn in its subject and text, some
// texts doubled past the input limit and some cut mid-character.
func mangled(ins []Input) []Input {
	rng := rand.New(rand.NewPCG(29, 7))
	out := make([]Input, 0, len(ins))
	for _, in := range ins {
		words := strings.SplitAfter(in.Text, " ")
		for range 1 + rng.IntN(12) {
			k := rng.IntN(len(words) + 1)
			p := oddPieces[rng.IntN(len(oddPieces))] + " "
			if rng.IntN(3) == 0 {
				p = "\n" + p
			}
			words = append(words[:k], append([]string{p}, words[k:]...)...)
		}
		text := strings.Join(words, "")
		switch rng.IntN(40) {
		case 0:
			text = strings.Repeat(text+"\n", 1+MaxTextChars/max(1, len(text)))
		case 1, 2, 3, 4, 5:
			text = text[:rng.IntN(len(text)+1)]
		case 6, 7, 8, 9, 10:
			text = strings.ToUpper(text)
		}
		subject := in.Subject + " " + oddPieces[rng.IntN(len(oddPieces))]
		m := NewInput(in.From, in.To, nil, subject, in.ReceivedAt, text)
		m.Headers, m.RepliesToOurs = in.Headers, in.RepliesToOurs
		out = append(out, m)
	}
	return out
}

// digest is the SHA-256 of the answers' bits, in order.
func digest(all []Scores) string {
	h := sha256.New()
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	for _, s := range all {
		for _, p := range s.Category {
			put(math.Float64bits(p))
		}
		put(math.Float64bits(s.NeedsReply))
		for _, p := range s.Urgency {
			put(math.Float64bits(p))
		}
		put(uint64(s.InputTokens))
	}
	return hex.EncodeToString(h.Sum(nil))
}
