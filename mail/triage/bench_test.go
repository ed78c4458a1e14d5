package triage

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBuiltinLong classifies a message at the 32,768-character cap.
func BenchmarkBuiltinLong(b *testing.B) {
	bi, err := NewBuiltin()
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("Hi team, the export of invoice INV-2026-0412 failed again with error 500 since 09:14 UTC. Could you look at it today?\n", 400)
	in := NewInput("ann@example.com", []string{"desk@inboxd.test"}, nil, "Export failing", time.Now(), text)
	b.ReportAllocs()
	for b.Loop() {
		bi.Predict(in)
	}
}

// BenchmarkBuiltinMail classifies 2 KB messages of everyday words mixed with rare ones,
// as the SMTP benchmark's are: most of their words and bigrams are not features.
func BenchmarkBuiltinMail(b *testing.B) {
	bi, err := NewBuiltin()
	if err != nil {
		b.Fatal(err)
	}
	common := strings.Fields("the invoice for your order is attached please review and reply by friday thanks team meeting report account payment")
	rng := rand.New(rand.NewPCG(1, 2))
	var text strings.Builder
	for text.Len() < 2048 {
		if rng.IntN(2) == 0 {
			text.WriteString(common[rng.IntN(len(common))])
		} else {
			for range 4 + rng.IntN(6) {
				text.WriteByte(byte('a' + rng.IntN(26)))
			}
		}
		sep := byte(' ')
		if rng.IntN(12) == 0 {
			sep = '\n'
		}
		text.WriteByte(sep)
	}
	in := NewInput("ann@example.com", []string{"desk@inboxd.test"}, nil, "Quarterly figures", time.Now(), text.String())
	b.ReportAllocs()
	for b.Loop() {
		bi.Predict(in)
	}
}

// BenchmarkBuiltinZipfMail classifies a stream of different 2 KB messages whose words follow
// Zipf's law over a 40,000-word vocabulary of made-up words, on every core at once, as the
// SMTP benchmark's mail does: most words are outside the model's vocabulary and repeat with
// a long tail, so what it measures is the n-gram cache shared by concurrent messages.
func BenchmarkBuiltinZipfMail(b *testing.B) {
	bi, err := NewBuiltin()
	if err != nil {
		b.Fatal(err)
	}
	inputs := zipfMail(12000, 40000)
	b.ReportAllocs()
	var next atomicCounter
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bi.Predict(inputs[next.add()%uint64(len(inputs))])
		}
	})
}

// zipfReceived is when zipfMail's messages arrive: a weekday afternoon, fixed, because
// the model reads the hour and the weekday and TestPredictionsStayBitIdentical keeps the
// digest of its answers (with the time of the run it failed from 18:00 UTC on).
var zipfReceived = time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)

// zipfMail makes n messages of about 2 KB from a vocabulary of size made-up words drawn
// with Zipf's law (s = 1.07), received at zipfReceived.
func zipfMail(n, size int) []Input {
	rng := rand.New(rand.NewPCG(3, 4))
	syllables := strings.Fields("ka lo mi ne ro sa ti vu be da fe gi ho ju ko la me ni po qu re si to va we xi yo za an el")
	vocab := make([]string, size)
	cdf := make([]float64, size)
	sum := 0.0
	for i := range vocab {
		var w strings.Builder
		for range 2 + rng.IntN(3) {
			w.WriteString(syllables[rng.IntN(len(syllables))])
		}
		vocab[i] = w.String()
		sum += 1 / math.Pow(float64(i+1), 1.07)
		cdf[i] = sum
	}
	inputs := make([]Input, n)
	for i := range inputs {
		var text strings.Builder
		for text.Len() < 2048 {
			k, _ := slices.BinarySearch(cdf, rng.Float64()*sum)
			text.WriteString(vocab[min(k, size-1)])
			text.WriteByte(" \n"[min(rng.IntN(12), 1)^1])
		}
		inputs[i] = NewInput("ann@example.com", []string{"desk@inboxd.test"}, nil, "Weekly report", zipfReceived, text.String())
	}
	return inputs
}

type atomicCounter struct{ n atomic.Uint64 }

func (c *atomicCounter) add() uint64 { return c.n.Add(1) }
