package main

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

// log2Ticks marks the concurrency levels on a log axis.
type concTicks []int

func (t concTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, c := range t {
		out = append(out, plot.Tick{Value: float64(c), Label: fmt.Sprint(c)})
	}
	return out
}

type msTicks struct{}

func (msTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, v := range []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000} {
		if v >= min*0.999 && v <= max*1.001 {
			out = append(out, plot.Tick{Value: v, Label: fmt.Sprint(v)})
		}
	}
	return out
}

// drawChart writes a PNG of latency against concurrency, p50 and p99 side by side, one
// line per operation.
func drawChart(path string, ops []opResult, levels []int) error {
	names := []string{}
	byName := map[string]map[int]opResult{}
	for _, r := range ops {
		if byName[r.op] == nil {
			byName[r.op] = map[int]opResult{}
			names = append(names, r.op)
		}
		byName[r.op][r.conc] = r
	}
	lo, hi := math.Inf(1), 0.0
	for _, r := range ops {
		for _, v := range []float64{benchkit.Ms(r.p50), benchkit.Ms(r.p99)} {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if hi == 0 {
		lo, hi = 0.1, 1
	}
	panel := func(title string, get func(opResult) float64, legend bool) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "concurrent clients"
		p.Y.Label.Text = "latency (ms, log scale)"
		p.X.Scale = plot.LogScale{}
		p.Y.Scale = plot.LogScale{}
		p.X.Tick.Marker = concTicks(levels)
		p.Y.Tick.Marker = msTicks{}
		p.X.Min, p.X.Max = 0.8, float64(levels[len(levels)-1])*1.25
		p.Y.Min, p.Y.Max = math.Max(0.05, lo*0.7), hi*1.4
		p.Add(plotter.NewGrid())
		for i, name := range names {
			var pts plotter.XYs
			for _, c := range levels {
				if r, ok := byName[name][c]; ok && get(r) > 0 {
					pts = append(pts, plotter.XY{X: float64(c), Y: get(r)})
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, err
			}
			col := palette[i%len(palette)]
			l.Color, s.Color = col, col
			l.Width = vg.Points(1.5)
			s.Shape = draw.CircleGlyph{}
			p.Add(l, s)
			if legend {
				p.Legend.Add(name, l, s)
			}
		}
		p.Legend.Top = true
		p.Legend.Left = true
		p.Legend.XOffs = vg.Millimeter * 4
		p.Legend.YOffs = -vg.Millimeter * 8
		return p, nil
	}
	p50, err := panel("p50 latency", func(r opResult) float64 { return benchkit.Ms(r.p50) }, true)
	if err != nil {
		return err
	}
	p99, err := panel("p99 latency", func(r opResult) float64 { return benchkit.Ms(r.p99) }, false)
	if err != nil {
		return err
	}
	const w, h = 12 * vg.Inch, 5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	t := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{p50, p99}}, t, dc)
	p50.Draw(canvases[0][0])
	p99.Draw(canvases[0][1])
	return savePNG(img, path)
}
