package triage

import (
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
