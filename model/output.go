package model

// Schema names the JSON form of an Output (docs/schemas/model.json).
const Schema = "slowstart.model/v1"

// Output is the prediction for one path and several initial windows, as
// slowstart model --json prints it.
type Output struct {
	Schema string       `json:"schema"` // Schema
	Path   Path         `json:"path"`
	Runs   []Prediction `json:"runs"`
}

// Path describes the path and the transfer predicted.
type Path struct {
	RTTMs             float64 `json:"rtt_ms"`
	RateBitsPerSecond int64   `json:"rate_bps"`
	BDPBytes          int64   `json:"bdp_bytes"`
	SizeBytes         int64   `json:"size_bytes"` // headers and body: the response on the wire
	BodyBytes         int64   `json:"body_bytes"`
	MSS               int     `json:"mss"`
	RwndBytes         int64   `json:"rwnd_bytes"` // 0: a Linux client's default
	TLS               string  `json:"tls"`
	ChainBytes        int     `json:"chain_bytes"`
	DelayedACK        bool    `json:"delayed_ack"`
	CC                string  `json:"cc"`
}

// Prediction is one initial window's prediction.
type Prediction struct {
	IW         int              `json:"iw"`
	Result     Result           `json:"prediction"`
	Budget     []Budget         `json:"slow_start_budget"`
	ClosedForm ClosedFormResult `json:"equation_1"`
}

// Predict simulates p with each initial window of iws: the Output of model
// --json. bodyBytes is the body within p.SizeBytes.
func Predict(p Params, iws []int, bodyBytes int64) (*Output, error) {
	return PredictProgress(p, iws, bodyBytes, nil)
}

// PredictProgress is Predict, telling progress (when not nil) how far it is:
// bytes of responses simulated, done of total (the total is the same on every
// call).
func PredictProgress(p Params, iws []int, bodyBytes int64, progress func(doneBytes, totalBytes int64)) (*Output, error) {
	out := &Output{Schema: Schema}
	total := int64(len(iws)) * SimulationBytes(p)
	var before int64
	for _, iw := range iws {
		q := p
		q.IW = iw
		var report func(int64)
		if progress != nil {
			report = func(done int64) { progress(before+done, total) }
		}
		res, err := SimulateProgress(q, report)
		before += SimulationBytes(q)
		if err != nil {
			return nil, err
		}
		out.Runs = append(out.Runs, Prediction{IW: iw, Result: res, ClosedForm: ClosedForm(res.Params),
			Budget: SlowStartBudget(iw, res.Params.MSS, res.Params.SizeBytes, p.RwndBytes, 64)})
	}
	if len(out.Runs) > 0 {
		r := out.Runs[0].Result.Params
		out.Path = Path{RTTMs: float64(r.RTTNs) / 1e6, RateBitsPerSecond: r.RateBitsPerSecond, SizeBytes: r.SizeBytes,
			BodyBytes: bodyBytes, MSS: r.MSS, RwndBytes: r.RwndBytes, TLS: r.TLS, ChainBytes: r.ChainBytes,
			DelayedACK: r.DelayedACK, CC: r.CC}
		if r.RateBitsPerSecond > 0 {
			out.Path.BDPBytes = r.RateBitsPerSecond / 8 * r.RTTNs / 1e9
		}
	}
	return out, nil
}
