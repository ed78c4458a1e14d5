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

// segPluginType is the name of our segment plugin in scorch's registry; the index's
// configuration chooses it (scorchConfig), and scorch records it in the index, so that an
// index made with it is opened with it again. Other bleve indexes in the process keep
// scorch's default.
const segPluginType = "inboxd-zap"

// segPlugin is zapx v17's segment plugin under a name of its own, with new segments built
// by buildSegment and merged by mergeSegments: zapx opens the files, and builds and merges
// anything the builder and the merger do not handle. Its segments are zap v17's bytes (segment_test.go compares them
// with zapx.New's), so zapx reads them as its own.
type segPlugin struct {
	zap.ZapPlugin
	built buildMemory // what the last segment built took, to size the next one's buffers
}

func init() {
	// Under its own name, not as the default: scorch's default stays zapx's plugin.
	scorch.RegisterSegmentPlugin(&segPlugin{}, false)
}

// Type is the plugin's name in scorch's registry. Its Version is zapx's (17).
func (*segPlugin) Type() string { return segPluginType }

func (p *segPlugin) New(docs []index.Document) (segment.Segment, uint64, error) {
	return p.NewUsing(docs, nil)
}

// NewUsing builds the segment of docs, with zapx if the batch holds anything the
// builder does not handle.
func (p *segPlugin) NewUsing(docs []index.Document, config map[string]interface{}) (segment.Segment, uint64, error) {
	sb, n, err := buildSegment(docs, config, &p.built)
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
// zapx if they hold anything the merger does not handle. Both scorch's merges use it: the
// persister's of the segments still in memory, and the merger's of files.
func (p *segPlugin) MergeUsing(segs []segment.Segment, drops []*roaring.Bitmap, path string,
	closeCh chan struct{}, s segment.StatsReporter, config map[string]interface{}) ([][]uint64, uint64, error) {
	nums, n, err := mergeSegments(segs, drops, path, closeCh, s)
	if errors.Is(err, errSegmentUnsupported) {
		return p.ZapPlugin.MergeUsing(segs, drops, path, closeCh, s, config)
	}
	// The counts zapx keeps of its merges.
	stats, _ := config[segment.StatsKey].(*segment.Stats)
	if stats == nil {
		return nums, n, err
	}
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
