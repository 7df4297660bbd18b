package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/wire"
)

// Routes, as the "route" label of sema_http_requests_total.
const (
	routeAcquire      = "acquire"
	routeRenew        = "renew"
	routeRelease      = "release"
	routeDescribe     = "describe"
	routeList         = "list"
	routeForceRelease = "force_release"
	routeGuarantees   = "guarantees"
	routeHealth       = "healthz"
	routeMux          = "mux"
	routeOther        = "other"
)

var allRoutes = []string{routeAcquire, routeRenew, routeRelease, routeDescribe, routeList,
	routeForceRelease, routeGuarantees, routeHealth, routeMux, routeOther}

// metrics are the server's Prometheus metrics. No metric has a per-name
// label: a server may see millions of names, and a label per name would
// make the series explode. Per-name state is what `sema status` and
// /v1/locks are for.
type metrics struct {
	requests    map[string]map[string]prometheus.Counter // route → code ("ok" or an error code)
	wait        prometheus.Histogram
	hold        *prometheus.HistogramVec
	grants      prometheus.Counter
	losses      *prometheus.CounterVec
	forced      prometheus.Counter
	longPolling prometheus.Gauge
}

// storeStats is what the embedded store shows of itself.
type storeStats interface {
	Stats() store.Stats
	SetOnEnd(func(reason store.Reason, held time.Duration))
}

// newMetrics registers the server's metrics in reg, and the embedded
// store's if st is not nil.
func newMetrics(reg *prometheus.Registry, st storeStats) *metrics {
	m := &metrics{requests: make(map[string]map[string]prometheus.Counter)}
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sema_http_requests_total", Help: "API requests by route and result code (ok or an error code).",
	}, []string{"route", "code"})
	codes := []string{"ok", codeGone}
	for c := range wire.HTTPStatus {
		codes = append(codes, c)
	}
	for _, r := range allRoutes {
		m.requests[r] = make(map[string]prometheus.Counter, len(codes))
		for _, c := range codes {
			m.requests[r][c] = reqs.WithLabelValues(r, c)
		}
	}
	buckets := prometheus.ExponentialBuckets(0.0001, 4, 12) // 100µs … ~7 min
	m.wait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sema_acquire_wait_seconds", Help: "Time a granted acquire waited in the queue.", Buckets: buckets,
	})
	m.hold = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sema_hold_seconds", Help: "How long leases were held, by how they ended (embedded store only).",
		Buckets: buckets,
	}, []string{"reason"})
	m.grants = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sema_grants_total", Help: "Leases granted through the API.",
	})
	m.losses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sema_lease_losses_total", Help: "Renewals refused because the lease was lost, by reason.",
	}, []string{"reason"})
	m.forced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sema_force_releases_total", Help: "Leases ended by an admin's force-release.",
	})
	m.longPolling = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sema_waiting_requests", Help: "Acquire requests waiting (long-poll) right now.",
	})
	reg.MustRegister(reqs, m.wait, m.hold, m.grants, m.losses, m.forced, m.longPolling,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if st != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "sema_holders", Help: "Live leases in the embedded store.",
			}, func() float64 { return float64(st.Stats().Holders) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "sema_waiters", Help: "Queued acquires in the embedded store.",
			}, func() float64 { return float64(st.Stats().Waiters) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sema_expirations_total", Help: "Leases of the embedded store that ended by TTL.",
			}, func() float64 { return float64(st.Stats().Expirations) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sema_store_fsyncs_total", Help: "Group commits (one write and one fsync each) of the embedded store's log.",
			}, func() float64 { return float64(st.Stats().Syncs) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sema_store_fsync_seconds_total", Help: "Time spent writing and fsyncing the embedded store's log.",
			}, func() float64 { return st.Stats().SyncTime.Seconds() }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sema_store_handoffs_total", Help: "Grants to queued waiters in the embedded store.",
			}, func() float64 { return float64(st.Stats().Handoffs) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sema_store_early_handoffs_total", Help: "Handoffs answered before their grant was on disk (behind a FAST record).",
			}, func() float64 { return float64(st.Stats().EarlyHandoffs) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sema_store_records_total", Help: "Records appended to the embedded store's log.",
			}, func() float64 { return float64(st.Stats().Records) }),
		)
		holds := map[store.Reason]prometheus.Observer{}
		for _, r := range []store.Reason{store.ReasonRelease, store.ReasonExpire, store.ReasonForce, store.ReasonGiveBack} {
			holds[r] = m.hold.WithLabelValues(r.String())
		}
		st.SetOnEnd(func(r store.Reason, held time.Duration) {
			if o := holds[r]; o != nil {
				o.Observe(held.Seconds())
			}
		})
	}
	return m
}

// request counts one answered request.
func (m *metrics) request(route, code string) {
	if c := m.requests[route][code]; c != nil {
		c.Inc()
	}
}
