package main

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Layout, in SVG units.
const (
	cols             = 3
	panelW, panelH   = 310, 220
	marginL, marginR = 52, 14
	marginT, marginB = 34, 34
)

// palette tells series apart for every kind of colour vision (Okabe–Ito).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00"}

// style is how series i is drawn: a series whose label begins with
// "before" is dashed, in the colour of the series at the same place
// among the others, so a figure and its earlier self share a colour.
func style(series []Series, i int) (colour, dash string) {
	before := func(s Series) bool { return strings.HasPrefix(strings.ToLower(s.Label), "before") }
	k := 0
	for j := range i {
		if before(series[j]) == before(series[i]) {
			k++
		}
	}
	if before(series[i]) {
		return palette[k%len(palette)], ` stroke-dasharray="5 4"`
	}
	return palette[k%len(palette)], ""
}

// point is one result's value of a panel's figure.
type point struct {
	tenants int
	v       float64
}

// points are s's values of p's figure, by tenants; the last result of a
// size wins.
func points(s Series, p Panel) []point {
	by := map[int]float64{}
	for _, r := range s.Results {
		if v, ok := r.Metrics[p.Metric]; ok && r.Flows == p.Flows {
			by[r.Tenants] = v
		}
	}
	out := make([]point, 0, len(by))
	for t, v := range by {
		out = append(out, point{t, v})
	}
	slices.SortFunc(out, func(a, b point) int { return cmp.Compare(a.tenants, b.tenants) })
	return out
}

// Draw writes the panels as one SVG, with the legend in the cell after
// the last panel.
func Draw(w io.Writer, series []Series, panels []Panel) error {
	rows := (len(panels) + 1 + cols - 1) / cols
	width, height := cols*panelW+24, rows*panelH // room for the last column's labels
	var err error
	printf := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, a...)
		}
	}
	printf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" font-family="system-ui, sans-serif" font-size="11">`+"\n", width, height, width, height)
	printf(`<title>How a replica's costs grow with the tenants registered (BenchmarkScale)</title>` + "\n")
	printf(`<rect width="100%%" height="100%%" fill="#fff"/>` + "\n")
	// The x axis is shared: every size any series measured.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, r := range s.Results {
			lo, hi = math.Min(lo, float64(r.Tenants)), math.Max(hi, float64(r.Tenants))
		}
	}
	xlo, xhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if xhi == xlo {
		xhi++
	}
	for i, p := range panels {
		x0, y0 := float64(i%cols*panelW), float64(i/cols*panelH)
		drawPanel(printf, series, p, x0, y0, xlo, xhi)
	}
	// The legend.
	lx, ly := float64(len(panels)%cols*panelW)+marginL, float64(len(panels)/cols*panelH)+marginT+10
	printf(`<text x="%.0f" y="%.0f" font-weight="600">Series</text>`+"\n", lx, ly)
	for i, s := range series {
		y := ly + 22 + float64(i)*20
		c, dash := style(series, i)
		printf(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2.5"%s/><circle cx="%.0f" cy="%.0f" r="3.5" fill="%s"/>`+"\n", lx-30, y-4, lx-4, y-4, c, dash, lx-17, y-4, c)
		printf(`<text x="%.0f" y="%.0f">%s</text>`+"\n", lx+4, y, html.EscapeString(s.Label))
	}
	printf(`<text x="%.0f" y="%.0f" fill="#555">x: tenants registered (log scale); one flow</text>`+"\n", lx-30, ly+22+float64(len(series))*20+8)
	printf(`<text x="%.0f" y="%.0f" fill="#555">in flight per active tenant; y from zero;</text>`+"\n", lx-30, ly+22+float64(len(series))*20+24)
	printf(`<text x="%.0f" y="%.0f" fill="#555">each line labelled at its largest registry</text>`+"\n", lx-30, ly+22+float64(len(series))*20+40)
	printf("</svg>\n")
	return err
}

func drawPanel(printf func(string, ...any), series []Series, p Panel, x0, y0, xlo, xhi float64) {
	pw, ph := float64(panelW-marginL-marginR), float64(panelH-marginT-marginB)
	left, top := x0+marginL, y0+marginT
	ymax := 0.0
	for _, s := range series {
		for _, pt := range points(s, p) {
			ymax = math.Max(ymax, pt.v)
		}
	}
	step := niceStep(ymax / 4)
	ytop := math.Max(step*math.Ceil(ymax*1.08/step), step)
	xpos := func(t float64) float64 { return left + (math.Log10(t)-xlo)/(xhi-xlo)*pw }
	ypos := func(v float64) float64 { return top + ph - v/ytop*ph }
	printf(`<text x="%.0f" y="%.0f" font-size="12" font-weight="600">%s</text>`+"\n", x0+12, y0+20, html.EscapeString(p.Title))
	for v := 0.0; v <= ytop+step/2; v += step {
		y := ypos(v)
		printf(`<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, y, left+pw, y)
		printf(`<text x="%.0f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", left-6, y+4, short(v))
	}
	for d := xlo; d <= xhi; d++ {
		x := xpos(math.Pow(10, d))
		printf(`<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#e5e5e5"/>`+"\n", x, top, x, top+ph)
		printf(`<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", x, top+ph+16, short(math.Pow(10, d)))
	}
	printf(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#999"/>`+"\n", left, top+ph, left+pw, top+ph)
	// Each line is labelled at its right end, the largest registry it
	// measured; labels that would overlap there are moved apart.
	type label struct {
		x, y   float64
		colour string
		text   string
	}
	var labels []label
	for i, s := range series {
		pts := points(s, p)
		if len(pts) == 0 {
			continue
		}
		c, dash := style(series, i)
		path := ""
		for j, pt := range pts {
			sep := "L"
			if j == 0 {
				sep = "M"
			}
			path += fmt.Sprintf("%s%.1f,%.1f ", sep, xpos(float64(pt.tenants)), ypos(pt.v))
		}
		printf(`<path d="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>`+"\n", path, c, dash)
		for _, pt := range pts {
			printf(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s tenants, %s</title></circle>`+"\n",
				xpos(float64(pt.tenants)), ypos(pt.v), c, html.EscapeString(s.Label), short(float64(pt.tenants)), short(pt.v))
		}
		end := pts[len(pts)-1]
		labels = append(labels, label{xpos(float64(end.tenants)) + 6, ypos(end.v) + 4, c, short(end.v)})
	}
	slices.SortFunc(labels, func(a, b label) int { return cmp.Compare(a.y, b.y) })
	for i := 1; i < len(labels); i++ {
		if math.Abs(labels[i].x-labels[i-1].x) < 30 && labels[i].y-labels[i-1].y < 12 {
			labels[i].y = labels[i-1].y + 12
		}
	}
	for _, l := range labels {
		printf(`<text x="%.1f" y="%.1f" fill="%s" font-size="10">%s</text>`+"\n", l.x, l.y, l.colour, l.text)
	}
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// short writes a value compactly: 1M, 100k, 1,377, 19.2, 0.75.
func short(v float64) string {
	switch {
	case v >= 1e6 && math.Mod(v, 1e6) == 0:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3 && math.Mod(v, 1e3) == 0:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	case v >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	case v >= 10:
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	default:
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	}
}
