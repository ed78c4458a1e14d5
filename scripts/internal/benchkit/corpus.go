package benchkit

import (
	"math"
	"math/rand/v2"
	"strings"
)

// Person is a correspondent: a display name and an address at Domain.
type Person struct{ Name, Addr, Domain string }

// Config shapes a corpus. The programs differ on purpose: the search bench wants a larger
// vocabulary (what makes a real inbox's index large) and reply prefixes in its subjects.
type Config struct {
	Seed       uint64
	Vocabulary int      // words in all: the common words, then made-up ones
	Senders    int      // distinct correspondents
	SenderSkew float64  // exponent of the skew in Sender: larger, fewer people write more mail
	Subjects   []string // templates for Subject, such as Subjects
}

// Corpus generates the text of mail, deterministic for a seed. Words follow Zipf's law
// over a vocabulary of common English and business words and a long tail of made-up rarer
// words, names and numbers; a few correspondents write most of the mail.
type Corpus struct {
	// Rng is the one random stream every draw comes from: a program that draws from it
	// too (attachments, timestamps) stays deterministic for the seed.
	Rng *rand.Rand
	// Vocab is ordered by rank: Vocab[0] is the most frequent word.
	Vocab   []string
	Senders []Person

	cdf      []float64
	skew     float64
	subjects []string
}

// CompanyMail is the corpus of the whole-server and SMTP benchmarks: 2,000 correspondents
// with a strong skew, as one company's inboxes see.
func CompanyMail(seed uint64) *Corpus {
	return New(Config{Seed: seed, Vocabulary: 40000, Senders: 2000, SenderSkew: 2.5, Subjects: Subjects})
}

// New builds the vocabulary and the senders; the order of its draws fixes every message
// generated after it.
func New(cfg Config) *Corpus {
	c := &Corpus{Rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), skew: cfg.SenderSkew, subjects: cfg.Subjects}
	seen := map[string]bool{}
	for _, w := range commonWords {
		if !seen[w] {
			seen[w] = true
			c.Vocab = append(c.Vocab, w)
		}
	}
	for len(c.Vocab) < cfg.Vocabulary {
		n := 2 + c.Rng.IntN(3)
		var b strings.Builder
		for range n {
			b.WriteString(syllables[c.Rng.IntN(len(syllables))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			c.Vocab = append(c.Vocab, w)
		}
	}
	// Zipf's law with s = 1.07 over the ranks.
	c.cdf = make([]float64, len(c.Vocab))
	sum := 0.0
	for i := range c.Vocab {
		sum += 1 / math.Pow(float64(i+1), 1.07)
		c.cdf[i] = sum
	}
	for i := range c.cdf {
		c.cdf[i] /= sum
	}
	for len(c.Senders) < cfg.Senders {
		f, l := firstNames[c.Rng.IntN(len(firstNames))], lastNames[c.Rng.IntN(len(lastNames))]
		dom := companies[c.Rng.IntN(len(companies))] + "." + tlds[c.Rng.IntN(len(tlds))]
		addr := strings.ToLower(f + "." + l + "@" + dom)
		if !seen[addr] {
			seen[addr] = true
			c.Senders = append(c.Senders, Person{Name: f + " " + l, Addr: addr, Domain: dom})
		}
	}
	return c
}

// Word draws a word by its Zipf frequency.
func (c *Corpus) Word() string {
	x := c.Rng.Float64()
	lo, hi := 0, len(c.cdf)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if c.cdf[mid] < x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return c.Vocab[lo]
}

// MidWord is a word of middle frequency (rank 60-3000): what people search for.
func (c *Corpus) MidWord() string { return c.Vocab[60+c.Rng.IntN(2940)] }

// Sender picks a correspondent with a skew.
func (c *Corpus) Sender() Person {
	return c.Senders[int(float64(len(c.Senders))*math.Pow(c.Rng.Float64(), c.skew))]
}
