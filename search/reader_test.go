package search

import (
	"context"
	"path/filepath"
	"testing"

	qt "github.com/frankban/quicktest"
)

// cursorSource records the cursors the index records in the change log.
type cursorSource struct {
	scanSource
	cursors map[string]int64
}

func (s *cursorSource) Trim(_ context.Context, reader string, through int64) error {
	s.cursors[reader] = through
	return nil
}

// An index follows the change log under one id of its own, which a rebuild keeps: the
// store must not take the rebuilt index for a new reader and hold the log for the old.
func TestAnIndexKeepsItsReaderIDAcrossRebuilds(t *testing.T) {
	c := qt.New(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.index")
	src := &cursorSource{scanSource: scanSource{docs: []Doc{{ID: 1, Inbox: 1, TS: 1, Subject: "one"}}}, cursors: map[string]int64{}}
	for range 2 {
		_, err := Rebuild(context.Background(), path, src, nil)
		c.Assert(err, qt.IsNil)
	}
	c.Assert(src.cursors, qt.HasLen, 1)
	other, err := readerID(filepath.Join(dir, "y.index"))
	c.Assert(err, qt.IsNil)
	_, same := src.cursors[other]
	c.Assert(same, qt.IsFalse)
}
