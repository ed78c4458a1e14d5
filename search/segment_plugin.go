package search

import (
	"errors"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	index "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	zap "github.com/blevesearch/zapx/v17"
)

// segPlugin is zapx v17's segment plugin with new segments built by buildSegment and
// merged by mergeSegments. It has zapx's type and version, so it takes zapx v17's place in
// scorch: segments on disk are opened by zapx as before, and an index written with it is
// an ordinary zap v17 index.
type segPlugin struct {
	zap.ZapPlugin
}

func init() {
	// Registered as the default and under ("zap", 17): scorch picks the plugin of a new
	// index from the default and that of an existing one by the type and version it
	// recorded.
	scorch.RegisterSegmentPlugin(&segPlugin{}, true)
}

// Open opens a segment file with zapx and advises its mapping random (segment_advice.go).
func (p *segPlugin) Open(path string) (segment.Segment, error) {
	seg, err := p.ZapPlugin.Open(path)
	if err == nil {
		adviseRandom(seg)
	}
	return seg, err
}

// OpenUsing is Open with a configuration.
func (p *segPlugin) OpenUsing(path string, config map[string]interface{}) (segment.Segment, error) {
	seg, err := p.ZapPlugin.OpenUsing(path, config)
	if err == nil {
		adviseRandom(seg)
	}
	return seg, err
}

func (p *segPlugin) New(docs []index.Document) (segment.Segment, uint64, error) {
	return p.NewUsing(docs, nil)
}

// NewUsing builds the segment of docs, with zapx if the batch holds anything the
// builder does not handle.
func (p *segPlugin) NewUsing(docs []index.Document, config map[string]interface{}) (segment.Segment, uint64, error) {
	sb, n, err := buildSegment(docs, config)
	if errors.Is(err, errSegmentUnsupported) {
		return p.ZapPlugin.NewUsing(docs, config)
	}
	if err != nil {
		return nil, 0, err
	}
	return sb, n, nil
}

func (p *segPlugin) Merge(segs []segment.Segment, drops []*roaring.Bitmap, path string,
	closeCh chan struct{}, s segment.StatsReporter) ([][]uint64, uint64, error) {
	return p.MergeUsing(segs, drops, path, closeCh, s, nil)
}

// MergeUsing merges segs without the documents in drops into a segment file at path, with
// zapx if they hold anything the merger does not handle.
func (p *segPlugin) MergeUsing(segs []segment.Segment, drops []*roaring.Bitmap, path string,
	closeCh chan struct{}, s segment.StatsReporter, config map[string]interface{}) ([][]uint64, uint64, error) {
	stats, _ := config[segment.StatsKey].(*segment.Stats)
	if stats == nil {
		stats = new(segment.Stats)
	}
	var nums [][]uint64
	var n uint64
	var err error
	niced(mergeNice, func() { nums, n, err = mergeSegments(segs, drops, path, closeCh, s) })
	if errors.Is(err, errSegmentUnsupported) {
		niced(mergeNice, func() { nums, n, err = p.ZapPlugin.MergeUsing(segs, drops, path, closeCh, s, config) })
		return nums, n, err
	}
	// The counts zapx keeps of its merges.
	atomic.AddUint64(&stats.TotMergesBeg, 1)
	atomic.AddUint64(&stats.TotMergeInputSegments, uint64(len(segs)))
	if err == nil {
		var kept, dropped uint64
		for _, ns := range nums {
			for _, num := range ns {
				if num == mergeDropped {
					dropped++
				} else {
					kept++
				}
			}
		}
		atomic.AddUint64(&stats.TotMergeDroppedDocs, dropped)
		atomic.AddUint64(&stats.TotMergeOutputDocs, kept)
	} else {
		atomic.AddUint64(&stats.TotMergesErrors, 1)
	}
	atomic.AddUint64(&stats.TotMergesEnd, 1)
	return nums, n, err
}
