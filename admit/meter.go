package admit

import (
	"math"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/smooth"
)

// counts is what the accept path has counted since New: arrivals per
// criticality, rejections per criticality and reason, and in dry-run the
// requests admitted that would have been rejected.
type counts struct {
	arrivals  [levee.NumCriticalities]uint64
	rejected  [levee.NumCriticalities][levee.NumReasons]uint64
	would     [levee.NumCriticalities][levee.NumReasons]uint64
	completed uint64 // tickets done
}

// meter is the first stage of a control period: it turns the accept
// path's cumulative counters into rates, smooths the arrival rate (a
// second, but a flood or a drop is taken at once) and tells a flood from
// noise before the signal shows it.
type meter struct {
	prev  counts
	rate  [levee.NumCriticalities]float64 // eligible arrivals per rank, smoothed (rateTau)
	share [levee.NumCriticalities]float64 // the same, smoothed slowly (shareTau)
	adm   float64                         // admitted rate, smoothed (admTau)
	init  bool
	flood bool // the previous period saw a flood ...
	// floodBase is the arrival rate before it (per second).
	floodBase float64
	// unread is the demand taken as waiting unread at the previous Step
	// (addUnread), rawUnread the count read then; valid when hasUnread.
	unread, rawUnread float64
	hasUnread         bool
}

// meterIn is one period's input to the meter.
type meterIn struct {
	counts   counts        // cumulative, read now
	dt       time.Duration // length of the period
	load     float64       // the signals' reading (max of value ÷ target)
	shedding bool          // the control law is shedding
	capEst   float64       // capacity learned so far (0: none)
	capCeil  float64       // the most the capacity can be, from what was learned (law.capCeil)
	// unread is the demand waiting unread now (signals.go's backlog;
	// NaN: unknown).
	unread float64
	// behind: the unread count is far above what a process that keeps
	// up with its connections shows (unreadBehind per core).
	behind bool
}

// unreadBehind is the unread count per core above which the process is
// taken to be behind on reading its connections: at rest it reads a few
// goroutines (0–7 on one core through a lab's calm phases), behind a
// backlog of admitted handlers hundreds (100–800 on one core at a 5×
// flood, the gRPC lab traced 2026-12-04).
const unreadBehind = 16

// meterOut is what the meter measured.
type meterOut struct {
	// R is the smoothed rate of eligible arrivals (past deadline and quota
	// checks), mix the same split between ranks by the slow shares.
	R   float64
	mix [levee.NumCriticalities]float64
	// arrived, eligible and admitted are this period's rates of all
	// arrivals, of eligible ones and of admitted requests (in dry-run,
	// every request not really rejected); admRate the admitted rate
	// smoothed.
	arrived, eligible, admitted, admRate float64
	// completed is this period's rate of tickets done.
	completed float64
	// jump: the arrival rate changed too much to be noise and was taken
	// at once.
	jump bool
	// flood: the arrivals jumped above floodJump × the capacity estimate
	// while not shedding (the signal shows it a period or two later);
	// wasFlood: the previous period saw one too.
	flood, wasFlood bool
}

// addUnread adds to this period's arrival rates the change of the demand
// waiting unread, while the controller is overloaded (shedding, or the
// signals above target). A saturated process that runs a goroutine per
// connection reads its connections behind the handlers it runs: at a
// flood's onset the arrivals it counts stay at what it reads (about its
// capacity) while the rest waits unread, so a plan made from them sheds
// nothing of what it reads, and reading stays as slow as the admitted
// work lets it be; later the backlog is read at once, counted as a flood
// many times the real one, and the plan refuses nearly everything for as
// long as that count stays in the smoothed rate. Counting the unread
// demand when it arrives (the count grows) and not again when it is read
// (the count falls) gives the rate at which requests arrive, which is
// what a plan needs.
//
// The count is a lower bound of what waits unread (a request in a
// socket buffer behind a multiplexed connection's reader, or in the
// accept queue, is not in it) and holds other goroutines too (handlers
// just admitted that have not reached their run slot, background work).
// So only its change is used, and only while overloaded: below target
// it is a few goroutines of noise. A rise counts once it has held for
// two Steps (the smaller of the last two counts is used), so goroutines
// that come and go within a period (a multiplexed reader handing over a
// batch of calls it counted already) add nothing, while a fall counts at
// once. Over any stretch its changes sum to the count's own change, so
// nothing it adds accumulates beyond the count.
// The change is split between ranks as the arrivals counted this period
// are, or as the slow shares split them when none were counted.
func (m *meter) addUnread(rateNow *[levee.NumCriticalities]float64, in meterIn, sec float64) {
	if math.IsNaN(in.unread) {
		m.hasUnread = false
		return
	}
	eff := in.unread
	if m.hasUnread {
		eff = min(eff, m.rawUnread)
	}
	prev, had := m.unread, m.hasUnread
	m.unread, m.rawUnread, m.hasUnread = eff, in.unread, true
	if !had || !(in.shedding || in.load > 1) {
		return
	}
	d := (eff - prev) / sec
	var total, shares float64
	for r := range rateNow {
		total += rateNow[r]
		shares += m.share[r]
	}
	switch {
	case total > 0:
		k := max(0, total+d) / total
		for r := range rateNow {
			rateNow[r] *= k
		}
	case d > 0 && shares > 0:
		for r := range rateNow {
			rateNow[r] = d * m.share[r] / shares
		}
	}
}

// step closes one period.
func (m *meter) step(in meterIn) meterOut {
	var out meterOut
	sec := in.dt.Seconds()
	var rateNow [levee.NumCriticalities]float64
	for cr := range levee.NumCriticalities {
		a, rej, would := in.counts.arrivals[cr], in.counts.rejected[cr], in.counts.would[cr]
		p, pw := &m.prev.rejected[cr], &m.prev.would[cr]
		dA := a - m.prev.arrivals[cr]
		dD := rej[levee.Deadline] - p[levee.Deadline]
		dQ := rej[levee.Quota] - p[levee.Quota]
		dO := rej[levee.Overloaded] - p[levee.Overloaded]
		// In dry-run, requests that would have been refused for their
		// deadline or quota are admitted: they load the server, but
		// would not reach the overload stage live.
		wDQ := would[levee.Deadline] - pw[levee.Deadline] + would[levee.Quota] - pw[levee.Quota]
		elig := float64(dA) - float64(dD) - float64(dQ) - float64(wDQ)
		rateNow[levee.Criticality(cr).Rank()] = max(0, elig) / sec
		out.eligible += max(0, elig) / sec
		out.admitted += max(0, float64(dA)-float64(dD)-float64(dQ)-float64(dO)) / sec
		out.arrived += float64(dA) / sec
	}
	out.completed = float64(in.counts.completed-m.prev.completed) / sec
	m.prev = in.counts
	m.addUnread(&rateNow, in, sec)
	// Arrival rates: smoothed over a second (their noise would move the
	// ladder position every period), but a flood or a drop of a third or
	// more is taken at once.
	var total, totalNow float64
	for r := range m.rate {
		total += m.rate[r]
		totalNow += rateNow[r]
	}
	// In counts per period, with a margin of three Poisson deviations so
	// that arrival noise at low rates is not taken for a change.
	exp, got := total*sec, totalNow*sec
	margin := 3 * math.Sqrt(exp)
	wasInit := m.init
	// A drop seen while the signal reads overloaded, or while shedding
	// with the process behind on reading its connections, is more likely
	// the process falling behind (a saturated one-core process runs its
	// connection goroutines late) than the clients going away: taken at
	// once, it would raise the admitted fraction just as the backlog
	// grows. It is smoothed like any other change. The second case is
	// the one the signals miss: a one-core gRPC server at a 5× flood,
	// hundreds of goroutines waiting for the core behind a batch it had
	// admitted, counted no arrival in a period while its CPU reading had
	// dipped to 0.68 of target; the drop, taken at once, published a plan
	// that shed nothing, and the reader's next batch was admitted (the
	// gRPC lab, traced 2026-12-04; TestMeterStep's "behind on reading").
	drop := got < exp/rateJump-margin-1 && !(in.shedding && (in.load > 1 || in.behind))
	jump := !m.init || got > rateJump*exp+margin+1 || drop
	// Shedding while the signal reads below half its target: the arrivals
	// have fallen (a spike ended) and the smoothed rate, kept high for a
	// second, would go on shedding most of what follows. Take the period's
	// count as it is.
	jump = jump || (in.shedding && in.load < minLoad && got < exp)
	// The split between ranks moves slowly (shareTau): its noise would
	// move the ladder's position every period.
	ash := smooth.Alpha(in.dt, shareTau)
	for r := range m.share {
		if !m.init {
			m.share[r] = rateNow[r]
		} else {
			m.share[r] = smooth.Toward(m.share[r], rateNow[r], ash)
		}
	}
	ar := smooth.Alpha(in.dt, rateTau)
	for r := range m.rate {
		if jump {
			m.rate[r] = rateNow[r]
		} else {
			m.rate[r] = smooth.Toward(m.rate[r], rateNow[r], ar)
		}
	}
	if !m.init {
		m.adm = out.admitted
	} else {
		m.adm = smooth.Toward(m.adm, out.admitted, smooth.Alpha(in.dt, admTau))
	}
	m.init = true
	for _, r := range m.rate {
		out.R += r
	}
	out.jump, out.admRate = jump, m.adm

	// The split between ranks comes from the slow per-rank rates, the
	// total from the fast one: the ladder position does not jitter with
	// each period's arrivals.
	var sum float64
	for _, v := range m.share {
		sum += v
	}
	for r := range out.mix {
		if sum > 0 {
			out.mix[r] = out.R * m.share[r] / sum
		}
	}

	// A flood seen in the arrivals before the signal: the rate jumped to
	// more than floodJump times the capacity learned so far, and above
	// the most the capacity can be (law.capCeil: learned at light load,
	// the estimate is a floor, and twice it may fit). The signal
	// shows it a period or two later, and by then the requests admitted
	// meanwhile (on a one-core server with 1 ms requests, 0.1 s of a 5×
	// flood is 0.5 s of work) have stalled the process and filled the
	// kernel's queues with requests that will expire before they are read.
	//
	// A period's count can jump by chance: at tens of requests a second a
	// 50 ms period expects a few, and three Poisson deviations above
	// that are passed every few thousand periods (a 64-core server of 1 s
	// requests at 0.95 of its capacity, 3 a period expected, counted 11
	// in one every few minutes, and the smoothed rate, taken up at once,
	// stayed above the flood's bar for the second period: an episode
	// entered on nothing, the simulator's sweep). The second period
	// confirms a flood by its own count, judged against the rate before
	// the jump as the first was, and above the flood's bar itself. Three
	// deviations are passed by chance at most about once in 700 periods
	// (the normal tail; a Poisson count of a few, less often), two periods
	// in a row at most about once in half a million. The bar: a step to
	// 1.5 times the capacity from 0.6 of it, its first period counted
	// high (a queue's rise counted as arrivals the period after it
	// happened, on top of that period's own), passed the jump test in
	// its second period too; entered as a flood, the episode aimed at
	// the capacity while its smoothed rate stayed at the first period's,
	// admitted 0.47 of the arrivals (0.7 of the capacity) and went on
	// shedding half of them for a second after the step ended, the CPU
	// at 0.6 (the simulator, three cores of 10 ms requests).
	flood := !in.shedding && in.capEst > 0 && out.R > floodJump*in.capEst && out.R > in.capCeil
	switch {
	case flood && m.flood:
		b := m.floodBase * sec
		flood = got > rateJump*b+3*math.Sqrt(b)+1 && got > max(floodJump*in.capEst, in.capCeil)*sec
	case flood:
		flood = wasInit && jump
		m.floodBase = total
	}
	out.wasFlood = m.flood
	out.flood = flood
	m.flood = flood && !out.wasFlood
	return out
}
