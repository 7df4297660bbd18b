package lockbench

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// LoadAvg returns the host's load averages (1, 5, 15 min), or "unknown".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// fmtDur prints a duration in ms with 2-3 significant digits.
func fmtDur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 1:
		return fmt.Sprintf("%.3fms", ms)
	case ms < 100:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 10000:
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%.1fs", ms/1000)
}

// pivotResult is the lock-wait distribution of one configuration. The p99
// comes with its 95% confidence interval [p99lo, p99hi]: with n waits, the
// true 99th percentile lies between these two order statistics with 95%
// probability, whatever the distribution.
type pivotResult struct {
	n             int
	avg, p99, max time.Duration
	p99lo, p99hi  time.Duration
}

func summarize(ws []time.Duration) pivotResult {
	if len(ws) == 0 {
		return pivotResult{}
	}
	slices.Sort(ws)
	var sum time.Duration
	for _, w := range ws {
		sum += w
	}
	n := len(ws)
	i := (n*99+99)/100 - 1 // nearest-rank p99
	lo, hi := quantileCI(n, 0.99)
	return pivotResult{n: n, avg: sum / time.Duration(n), p99: ws[i], max: ws[n-1], p99lo: ws[lo], p99hi: ws[hi]}
}

// quantileCI returns the 0-based ranks of the order statistics that bound
// the q-quantile of n samples with about 95% confidence (normal
// approximation of the binomial count of samples below the quantile).
func quantileCI(n int, q float64) (lo, hi int) {
	sd := 1.96 * math.Sqrt(float64(n)*q*(1-q))
	lo = int(math.Floor(float64(n)*q-sd)) - 1
	hi = int(math.Ceil(float64(n)*q+sd)) - 1
	return min(max(lo, 0), n-1), min(max(hi, 0), n-1)
}
