package search

import (
	"errors"

	"github.com/blevesearch/bleve/v2/index/scorch"
	index "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	zap "github.com/blevesearch/zapx/v17"
)

// segPlugin is zapx v17's segment plugin with new segments built by buildSegment. It has
// zapx's type and version, so it takes zapx v17's place in scorch: segments on disk are
// opened and merged by zapx as before, and an index written with it is an ordinary zap v17
// index.
type segPlugin struct {
	zap.ZapPlugin
}

func init() {
	// Registered as the default and under ("zap", 17): scorch picks the plugin of a new
	// index from the default and that of an existing one by the type and version it
	// recorded.
	scorch.RegisterSegmentPlugin(&segPlugin{}, true)
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
