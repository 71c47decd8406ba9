package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/agentwarden/warden/bench/load"
)

// Series is one latency distribution of a panel.
type Series struct {
	Name   string
	Points []load.Point
}

// Panel is one chart: the distributions of one scenario at one load.
type Panel struct {
	Title  string
	Series []Series
}

// nines maps a percentile onto the chart's x axis: 90 -> 1, 99 -> 2, 99.9 -> 3.
func nines(p float64) float64 { return -math.Log10(1 - p/100) }

// maxNines keeps the 100th percentile (the maximum) on the axis.
const maxNines = 4.5

// percentileTicks labels the x axis with percentiles.
type percentileTicks struct{}

// Ticks implements plot.Ticker.
func (percentileTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, t := range []struct {
		p     float64
		label string
	}{{0, "0%"}, {50, "50%"}, {90, "90%"}, {99, "99%"}, {99.9, "99.9%"}, {99.99, "99.99%"}} {
		if x := nines(t.p); x >= lo && x <= hi {
			ticks = append(ticks, plot.Tick{Value: x, Label: t.label})
		}
	}
	return ticks
}

// latencyTicks marks a log latency axis at 1, 2 and 5 times the powers of
// ten (labelled in µs, ms or s), with unlabelled ticks between them.
type latencyTicks struct{}

// Ticks implements plot.Ticker.
func (latencyTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m <= 9; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = micros(v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// micros prints a latency given in microseconds in the largest unit that
// keeps it whole-ish: 100 µs, 10 ms, 1 s.
func micros(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + " s"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + " ms"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64) + " µs"
	}
}

// palette colours the series of a panel in order.
var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// newPlot draws one panel: latency against percentile, both on log scales.
func newPlot(p Panel) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = "percentile"
	pl.Y.Label.Text = "latency (log scale)"
	pl.X.Tick.Marker = percentileTicks{}
	pl.X.Min, pl.X.Max = 0, maxNines
	pl.Y.Scale = plot.LogScale{}
	pl.Y.Tick.Marker = latencyTicks{}
	pl.Legend.Top = true
	pl.Legend.Left = true
	pl.Add(plotter.NewGrid())
	for i, s := range p.Series {
		var xys plotter.XYs
		for _, pt := range s.Points {
			if pt.Micros <= 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: min(nines(pt.Percentile), maxNines), Y: pt.Micros})
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("chart %s %s: %w", p.Title, s.Name, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		pl.Add(l)
		pl.Legend.Add(s.Name, l)
	}
	return pl, nil
}

// WriteChart draws the panels two to a row into a PNG file.
func WriteChart(path string, panels []Panel) error {
	if len(panels) == 0 {
		return fmt.Errorf("chart %s: no panels", path)
	}
	const cols = 2
	rows := (len(panels) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for r := range plots {
		plots[r] = make([]*plot.Plot, cols)
	}
	for i, p := range panels {
		pl, err := newPlot(p)
		if err != nil {
			return err
		}
		plots[i/cols][i%cols] = pl
	}
	img := vgimg.New(vg.Length(cols)*6*vg.Inch, vg.Length(rows)*3.5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for r := range plots {
		for c, pl := range plots[r] {
			if pl != nil {
				pl.Draw(canvases[r][c])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return f.Close()
}
