package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentwarden/warden/decisionlog"
)

// shipMetrics counts the decision log's shipping (decisionlog.ShipObserver):
// records dropped by reason, uploads by outcome and the records they held.
type shipMetrics struct {
	dropped  *prometheus.CounterVec
	uploads  *prometheus.CounterVec
	uploaded *prometheus.CounterVec
}

func newShipMetrics(reg prometheus.Registerer) *shipMetrics {
	m := &shipMetrics{
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_decision_log_dropped_total",
			Help: "Decision records that will never reach the decision log service, by reason: buffer_full (the oldest waiting records made room), too_large (one record over batch_bytes), rejected (the service refused the batch with a 4xx), shutdown (left at shutdown_timeout).",
		}, []string{"reason"}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_decision_log_uploads_total",
			Help: "Uploads of decision-log batches to the service, by outcome: success, failure (retried: transport error, 408, 429, 5xx), rejected (other status: dropped).",
		}, []string{"outcome"}),
		uploaded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_decision_log_upload_records_total",
			Help: "Decision records in the uploads of warden_decision_log_uploads_total, by outcome (success: shipped).",
		}, []string{"outcome"}),
	}
	for _, r := range decisionlog.DropReasons {
		m.dropped.WithLabelValues(r)
	}
	for _, o := range decisionlog.UploadOutcomes {
		m.uploads.WithLabelValues(o)
		m.uploaded.WithLabelValues(o)
	}
	reg.MustRegister(m.dropped, m.uploads, m.uploaded)
	return m
}

// Dropped implements decisionlog.ShipObserver.
func (m *shipMetrics) Dropped(reason string, n int) {
	m.dropped.WithLabelValues(reason).Add(float64(n))
}

// Uploaded implements decisionlog.ShipObserver.
func (m *shipMetrics) Uploaded(outcome string, n int) {
	m.uploads.WithLabelValues(outcome).Inc()
	m.uploaded.WithLabelValues(outcome).Add(float64(n))
}
