package reproduce

import (
	"math"
	"sort"

	"github.com/slowstart/slowstart/lab"
	"github.com/slowstart/slowstart/model"
	"github.com/slowstart/slowstart/stats"
)

// Point is one lab point's trials, summarized, with the model's prediction.
type Point struct {
	Spec   lab.Spec
	Rows   []lab.Row
	Failed int
	// Paper and User summarize the two flow completion times (ms) of the successful
	// trials; PaperCI and UserCI are the half-widths of the 95% confidence intervals
	// of their means.
	Paper, User     lab.Stats
	PaperCI, UserCI float64
	// DataLostMean is the mean number of data packets the emulator dropped per trial;
	// each is retransmitted by the server.
	DataLostMean float64
	Model        model.Result
	ModelErr     error
}

func summarize(spec lab.Spec, rows []lab.Row) Point {
	p := Point{Spec: spec, Rows: rows}
	var paper, user []float64
	var lost float64
	for _, r := range rows {
		if r.Error != "" {
			p.Failed++
			continue
		}
		paper, user = append(paper, r.FCTPaperMs), append(user, r.FCTUserMs)
		lost += float64(r.DataPacketsLost)
	}
	p.Paper, p.User = lab.Summarize(paper), lab.Summarize(user)
	p.PaperCI, p.UserCI = ci95(p.Paper), ci95(p.User)
	if n := len(paper); n > 0 {
		p.DataLostMean = lost / float64(n)
	}
	p.Model, p.ModelErr = model.Simulate(ModelParams(spec))
	return p
}

// ci95 is the half-width of the 95% confidence interval of the mean (Student's t).
func ci95(s lab.Stats) float64 { return stats.MeanCI95(s) }

// Improvement compares a base point (IW 3) with an experiment point (IW 10).
type Improvement struct {
	Base, Exp Point
	// AbsMs = base − exp (medians, paper definition); Percent = (base − exp) / base;
	// CS244Percent = base / exp − 1 (the CS244 reproduction's definition).
	AbsMs, Percent, CS244Percent float64
	// AbsCIMs is the half-width of the 95% interval of the difference of the means.
	AbsCIMs float64
	// User* are the same with the user-felt FCT (connect to last byte).
	UserAbsMs, UserPercent float64
	// Model* are the model's predictions of AbsMs and Percent.
	ModelAbsMs, ModelPercent float64
}

func improvement(base, exp Point) Improvement {
	im := Improvement{Base: base, Exp: exp}
	b, e := base.Paper.Median, exp.Paper.Median
	im.AbsMs = b - e
	if b > 0 {
		im.Percent = (b - e) / b * 100
	}
	if e > 0 {
		im.CS244Percent = (b/e - 1) * 100
	}
	im.AbsCIMs = math.Hypot(base.PaperCI, exp.PaperCI)
	ub, ue := base.User.Median, exp.User.Median
	im.UserAbsMs = ub - ue
	if ub > 0 {
		im.UserPercent = (ub - ue) / ub * 100
	}
	mb, me := base.Model.FCTPaperMs, exp.Model.FCTPaperMs
	im.ModelAbsMs = mb - me
	if mb > 0 {
		im.ModelPercent = (mb - me) / mb * 100
	}
	return im
}

func sortStable[T any](xs []T, less func(a, b T) bool) {
	sort.SliceStable(xs, func(i, j int) bool { return less(xs[i], xs[j]) })
}
