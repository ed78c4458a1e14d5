package search

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	zap "github.com/blevesearch/zapx/v17"
	qt "github.com/frankban/quicktest"
)

// The keys read from a segment's _id dictionary are those of its stored ids, for the
// segments the indexer builds, those zapx builds and those the merger writes.
func TestSegmentKeysFromDictionary(t *testing.T) {
	a, b := analyzedDocs(randomDocs(41, 1500)), analyzedDocs(randomDocs(42, 700))
	ours, zapx := buildOurs(t, a), buildZapx(t, b)
	path := filepath.Join(t.TempDir(), "merged.zap")
	_, _, err := mergeSegments([]segment.Segment{ours, zapx}, []*roaring.Bitmap{roaring.BitmapOf(0, 3, 1499), nil}, path, nil, nil)
	qt.Assert(t, err, qt.IsNil)
	merged, err := (&zap.ZapPlugin{}).Open(path)
	qt.Assert(t, err, qt.IsNil)
	defer merged.Close()
	for i, seg := range []segment.Segment{ours, zapx, merged} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			want, err := keysFromStored(seg)
			qt.Assert(t, err, qt.IsNil)
			got, err := keysFromDictionary(seg)
			qt.Assert(t, err, qt.IsNil)
			qt.Assert(t, slices.Equal(got, want), qt.IsTrue)
			qt.Assert(t, uint64(len(got)), qt.Equals, seg.Count())
		})
	}
	// A segment the dictionary cannot be read from gets its keys from the stored ids.
	other := struct{ segment.Segment }{ours}
	_, err = keysFromDictionary(other)
	qt.Assert(t, err, qt.ErrorIs, errSegmentUnsupported)
	got, err := segmentKeys(other)
	qt.Assert(t, err, qt.IsNil)
	want, err := keysFromStored(ours)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, slices.Equal(got, want), qt.IsTrue)
}
