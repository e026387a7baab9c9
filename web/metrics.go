package web

import (
	"context"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vmvault/vmvault/policy"
)

type metrics struct {
	s             *Server
	reg           *prometheus.Registry
	backups       *prometheus.CounterVec
	events        *prometheus.CounterVec
	loginFailures prometheus.Counter
	lockouts      *prometheus.CounterVec
	bytes         *prometheus.CounterVec
	durations     prometheus.Histogram
	handler       gin.HandlerFunc

	// Repository statistics walk every restore point: scrapes reuse them
	// for statsTTL.
	mu      sync.Mutex
	statsAt time.Time
	stats   []RepositoryInfo
}

const statsTTL = time.Minute

var (
	descTasks      = prometheus.NewDesc("vmvault_tasks", "Tasks queued or running.", []string{"state"}, nil)
	descRepoBytes  = prometheus.NewDesc("vmvault_repository_disk_bytes", "Bytes on disk of each repository.", []string{"repository"}, nil)
	descRepoPoints = prometheus.NewDesc("vmvault_repository_points", "Restore points in each repository.", []string{"repository"}, nil)
	descDedup      = prometheus.NewDesc("vmvault_repository_dedup_ratio", "Logical bytes over unique bytes.", []string{"repository"}, nil)
	descLastOK     = prometheus.NewDesc("vmvault_job_last_success_timestamp_seconds", "Newest successful VM backup of each job.", []string{"job"}, nil)
)

func newMetrics(s *Server, reg *prometheus.Registry) *metrics {
	m := &metrics{
		s:   s,
		reg: reg,
		backups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vmvault_vm_backups_total", Help: "VM backups finished, by result (success, failure, cancelled, interrupted).",
		}, []string{"result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vmvault_events_total", Help: "Events recorded, by severity.",
		}, []string{"severity"}),
		loginFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "vmvault_login_failures_total", Help: "Failed or rate-limited logins."}),
		lockouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vmvault_login_lockouts_total", Help: "Login lockout episodes, by scope: address (refused), user-address (refused), user (slowed, never refused).",
		}, []string{"scope"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vmvault_backup_bytes_total", Help: "Bytes of successful VM backups: read from vSphere, new to the repository, stored after compression.",
		}, []string{"kind"}),
		durations: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vmvault_vm_backup_duration_seconds", Help: "Duration of successful VM backups.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16),
		}),
	}
	reg.MustRegister(m.backups, m.events, m.loginFailures, m.lockouts, m.bytes, m.durations, m)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	m.handler = gin.WrapH(h)
	return m
}

func (m *metrics) observe(e policy.Event) {
	m.events.WithLabelValues(string(e.Severity)).Inc()
	switch e.Kind {
	case policy.EventVMBackedUp:
		m.backups.WithLabelValues("success").Inc()
	case policy.EventVMFailed:
		m.backups.WithLabelValues("failure").Inc()
	case policy.EventVMCancelled:
		m.backups.WithLabelValues("cancelled").Inc()
	case policy.EventVMInterrupted:
		m.backups.WithLabelValues("interrupted").Inc()
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTasks, descRepoBytes, descRepoPoints, descDedup, descLastOK} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: read at scrape time.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.s
	q, r := s.cfg.Tasks.Active()
	ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(q), "queued")
	ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(r), "running")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, ri := range m.repoStats(ctx) {
		ch <- prometheus.MustNewConstMetric(descRepoBytes, prometheus.GaugeValue, float64(ri.Stats.DiskBytes), ri.Name)
		ch <- prometheus.MustNewConstMetric(descRepoPoints, prometheus.GaugeValue, float64(ri.Stats.Points), ri.Name)
		ch <- prometheus.MustNewConstMetric(descDedup, prometheus.GaugeValue, ri.Stats.DedupRatio, ri.Name)
	}
	if s.cfg.VMStates != nil {
		if states, err := s.cfg.VMStates.VMStates(ctx); err == nil {
			last := map[string]time.Time{}
			for _, st := range states {
				if st.LastSuccess.After(last[st.Job]) {
					last[st.Job] = st.LastSuccess
				}
			}
			for job, t := range last {
				ch <- prometheus.MustNewConstMetric(descLastOK, prometheus.GaugeValue, float64(t.Unix()), job)
			}
		}
	}
}

func (m *metrics) repoStats(ctx context.Context) []RepositoryInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.s.now()
	if m.stats != nil && now.Sub(m.statsAt) < statsTTL {
		return m.stats
	}
	repos, err := m.s.cfg.Repositories.Repositories(ctx)
	if err != nil {
		return m.stats
	}
	out := []RepositoryInfo{}
	for _, ri := range repos {
		full, err := m.s.cfg.Repositories.Repository(ctx, ri.Name)
		if err != nil || full.Stats == nil {
			continue
		}
		out = append(out, full)
	}
	m.stats, m.statsAt = out, now
	return out
}

func (s *Server) serveMetrics(c *gin.Context) (any, error) {
	s.metrics.handler(c)
	return nil, nil
}
