package triage

import (
	"math/rand/v2"
	"strings"
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
