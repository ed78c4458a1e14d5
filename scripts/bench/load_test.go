package main

import (
	"testing"

	qt "github.com/frankban/quicktest"
)

// A list's two pages alternate so that drift falls on both alike: a b b a a b, and each
// starts (and so warms up) within the first turn.
func TestTurnOrder(t *testing.T) {
	qt.Assert(t, turnOrder(3), qt.DeepEquals, []int{0, 1, 1, 0, 0, 1})
	qt.Assert(t, turnOrder(1), qt.DeepEquals, []int{0, 1})
	qt.Assert(t, turnOrder(4), qt.DeepEquals, []int{0, 1, 1, 0, 0, 1, 1, 0})
}

// Slices of one operation add up: counts, time and disk reads, the first error kept.
func TestOpResultAdd(t *testing.T) {
	var r opResult
	r = r.add(opResult{op: "x", answered: 3, errors: 1, firstErr: "first", elapsed: 2, diskRead: 10})
	r = r.add(opResult{op: "x", answered: 4, errors: 2, firstErr: "second", elapsed: 3, diskRead: 5})
	qt.Assert(t, r == opResult{op: "x", answered: 7, errors: 3, firstErr: "first", elapsed: 5, diskRead: 15}, qt.IsTrue, qt.Commentf("%+v", r))
}
