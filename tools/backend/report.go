package backend

import (
	"time"

	"github.com/levee-dev/levee/tools/report"
)

// Instance converts the backend's report into levee's report schema: its
// totals and its series, aligned to start (the load generator's clock):
// buckets before start are dropped, and a backend that started later is
// padded with empty buckets. Received counts every answer (2xx, levee
// rejection, anything else) by completion time; Served the 2xx sent
// before their client's deadline; Wasted the handler runs that finished
// after it.
func (r Report) Instance(name string, start time.Time) (report.Instance, report.InstanceSeries) {
	s := r.Series
	in := report.Instance{Name: name, RejectedBy: s.RejectedBy, CPUS: report.Round(r.CPU.Seconds())}
	is := report.InstanceSeries{Name: name}
	if s.Resolution <= 0 {
		return in, is
	}
	shift := int(start.Sub(s.Start) / s.Resolution)
	at := func(xs []int64, i int) int64 {
		if i += shift; i >= 0 && i < len(xs) {
			return xs[i]
		}
		return 0
	}
	n := len(s.OK) - shift
	recv, served, rej, wasted := make([]int64, max(n, 0)), make([]int64, max(n, 0)), make([]int64, max(n, 0)), make([]int64, max(n, 0))
	for i := 0; i < n; i++ {
		recv[i] = at(s.OK, i) + at(s.Rejected, i) + at(s.Other, i)
		served[i] = at(s.OK, i) - at(s.OKLate, i)
		rej[i] = at(s.Rejected, i)
		wasted[i] = at(s.Late, i)
	}
	for i := range s.OK {
		in.Received += s.OK[i] + s.Rejected[i] + s.Other[i]
		in.Served += s.OK[i] - s.OKLate[i]
		in.Rejected += s.Rejected[i]
	}
	for _, l := range s.Late {
		in.Wasted += l
	}
	bs := s.Resolution.Seconds()
	is.ReceivedRPS = report.PerSecond(recv, bs)
	is.ServedRPS = report.PerSecond(served, bs)
	is.RejectedRPS = report.PerSecond(rej, bs)
	is.WastedRPS = report.PerSecond(wasted, bs)
	in.PeakRecvRPS = report.Round(report.BestSecond(is.ReceivedRPS, bs))
	if len(r.ShedLevel) > 0 {
		is.ShedLevel = make([]float64, max(n, 0))
		for i := range is.ShedLevel {
			if k := i + shift; k >= 0 && k < len(r.ShedLevel) {
				is.ShedLevel[i] = report.Round(r.ShedLevel[k])
			}
		}
	}
	return in, is
}

// WastedWorkShare is report.Run.WastedWorkShare for this backend: the
// share of its handler runs that finished after their client's deadline
// (work done for nobody; every run costs the same CPU).
func (r Report) WastedWorkShare() float64 {
	var runs, late int64
	for i := range r.Series.Runs {
		runs += r.Series.Runs[i]
		late += r.Series.Late[i]
	}
	return report.Share(float64(late), float64(runs))
}
