package metrics

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Connections are the API server's connection counters at one moment.
type Connections struct {
	// Limit is the cap on open connections.
	Limit int
	// Open counts the open connections; Unauthenticated those of them
	// that have not yet completed an authenticated request.
	Open, Unauthenticated int
	// Evicted counts the idle connections closed to make room.
	Evicted int64
	// AtLimit counts the times a new connection found the cap reached.
	AtLimit int64
	// Refused counts the requests refused with a closed connection, by
	// error code (unauthorized, forbidden, misdirected,
	// unsupported_media_type).
	Refused map[string]int64
}

var (
	connectionsDesc = prometheus.NewDesc("agentrunner_http_connections",
		"Open connections to the API, by whether a request on them was authenticated yet.", []string{"authenticated"}, nil)
	connectionLimitDesc = prometheus.NewDesc("agentrunner_http_connection_limit",
		"The cap on open API connections: server.max_connections, at most half the file descriptor limit.", nil, nil)
	evictedDesc = prometheus.NewDesc("agentrunner_http_connections_evicted_total",
		"Idle API connections closed to make room: unauthenticated ones beyond their quarter of the cap, or any at the cap.", nil, nil)
	atLimitDesc = prometheus.NewDesc("agentrunner_http_connection_limit_reached_total",
		"Times a new API connection found the cap reached.", nil, nil)
	refusedDesc = prometheus.NewDesc("agentrunner_http_requests_refused_total",
		"API requests refused and their connection closed, by error code (unauthorized, forbidden, misdirected, unsupported_media_type).", []string{"code"}, nil)
)

// connCollector reads the connection counters at scrape time.
type connCollector struct {
	stats func() Connections
}

var _ prometheus.Collector = connCollector{}

// WatchConnections adds the API server's connection metrics, read from
// stats at each scrape. Call it once.
func (m *Metrics) WatchConnections(stats func() Connections) {
	m.own.MustRegister(connCollector{stats: stats})
}

// Describe implements prometheus.Collector.
func (c connCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{connectionsDesc, connectionLimitDesc, evictedDesc, atLimitDesc, refusedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c connCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(st.Open-st.Unauthenticated), "true")
	ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(st.Unauthenticated), "false")
	ch <- prometheus.MustNewConstMetric(connectionLimitDesc, prometheus.GaugeValue, float64(st.Limit))
	ch <- prometheus.MustNewConstMetric(evictedDesc, prometheus.CounterValue, float64(st.Evicted))
	ch <- prometheus.MustNewConstMetric(atLimitDesc, prometheus.CounterValue, float64(st.AtLimit))
	// The codes are the server's own few, never a caller's value.
	for _, code := range slices.Sorted(maps.Keys(st.Refused)) {
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(st.Refused[code]), code)
	}
}
