package copyjob

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
)

// sharedPoint is a restore point a case starts with: in a source ("main",
// "second") or, as an original backup, in the target ("offsite").
type sharedPoint struct {
	label, repo, vm, job string
	age                  time.Duration // before t0
}

// Copy jobs sharing a target: a copy is removed only when no copy job into
// that target whose selection covers it keeps it (disabled jobs included,
// deleted jobs not), original backups in the target are never removed, and
// once every job has run a further round sends and removes nothing.
func TestSharedTargetRetention(t *testing.T) {
	web3 := []sharedPoint{
		{"m1", "main", "web", "nightly", 3 * time.Hour},
		{"m2", "main", "web", "nightly", 2 * time.Hour},
		{"m3", "main", "web", "nightly", time.Hour},
	}
	last := func(n int) func(*Job) { return func(j *Job) { j.Retention = policy.Retention{Last: n} } }
	for _, tc := range []struct {
		name   string
		points []sharedPoint
		jobs   []Job
		// steps: "run ID", "delete ID", "disable ID", "lose-source ID"
		// (the job's source repository leaves the configuration).
		steps []string
		want  []string // labels of the points the target holds at the end
		// wantWarn: a warning of the last run.
		wantWarn string
	}{{
		name:   "same pair, keep-last 1 runs after keep-last 3",
		points: web3,
		jobs:   []Job{job("a", last(1)), job("b", last(3))},
		steps:  []string{"run b", "run a"},
		want:   []string{"m1", "m2", "m3"},
	}, {
		name:   "same pair, keep-last 1 runs first and again",
		points: web3,
		jobs:   []Job{job("a", last(1)), job("b", last(3))},
		steps:  []string{"run a", "run b", "run a"},
		want:   []string{"m1", "m2", "m3"},
	}, {
		name: "overlapping selections: backup job and VM",
		points: []sharedPoint{
			{"w1", "main", "web", "nightly", 2 * time.Hour},
			{"w2", "main", "web", "nightly", time.Hour},
			{"d1", "main", "db", "nightly", 2 * time.Hour},
			{"d2", "main", "db", "nightly", time.Hour},
			{"x1", "main", "app", "weekly", 2 * time.Hour},
			{"x2", "main", "app", "weekly", time.Hour},
		},
		jobs: []Job{
			job("a", func(j *Job) {
				j.Jobs = []string{"nightly"}
				j.VMs = []string{"app"}
				j.Retention = policy.Retention{Last: 1}
			}),
			job("b", func(j *Job) { j.VMs = []string{"uuid-db"}; j.Retention = policy.Retention{Last: 2} }),
		},
		steps: []string{"run b", "run a", "run b", "run a"},
		// b covers db only: web and app are a's alone.
		want: []string{"w2", "d1", "d2", "x2"},
	}, {
		name: "overlapping VM lists",
		points: []sharedPoint{
			{"w1", "main", "web", "nightly", 2 * time.Hour},
			{"w2", "main", "web", "nightly", time.Hour},
			{"d1", "main", "db", "nightly", 2 * time.Hour},
			{"d2", "main", "db", "nightly", time.Hour},
		},
		jobs: []Job{
			job("a", func(j *Job) { j.VMs = []string{"web", "db"}; j.Retention = policy.Retention{Last: 2} }),
			job("b", func(j *Job) { j.VMs = []string{"web"}; j.Retention = policy.Retention{Last: 1} }),
		},
		steps: []string{"run a", "run b"},
		want:  []string{"w1", "w2", "d1", "d2"},
	}, {
		name: "different sources into one target, beside original backups",
		points: []sharedPoint{
			{"o1", "offsite", "web", "nightly", 10 * time.Hour},
			{"o2", "offsite", "web", "nightly", 0},
			{"m1", "main", "web", "nightly", 3 * time.Hour},
			{"m2", "main", "web", "nightly", 2 * time.Hour},
			{"s1", "second", "web", "nightly", 90 * time.Minute},
			{"s2", "second", "web", "nightly", 30 * time.Minute},
		},
		jobs:  []Job{job("a", last(1)), job("b", func(j *Job) { j.Source = "second"; j.Retention = policy.Retention{Last: 2} })},
		steps: []string{"run b", "run a", "run b", "run a"},
		want:  []string{"o1", "o2", "m2", "s1", "s2"},
	}, {
		name: "original backups in the target are never removed",
		points: []sharedPoint{
			{"o1", "offsite", "web", "nightly", 30 * time.Hour},
			{"o2", "offsite", "web", "nightly", 20 * time.Hour},
			{"m1", "main", "web", "nightly", 2 * time.Hour},
			{"m2", "main", "web", "nightly", time.Hour},
		},
		jobs:  []Job{job("a", last(1))},
		steps: []string{"run a", "run a"},
		want:  []string{"o1", "o2", "m2"},
	}, {
		name:   "a deleted job protects nothing",
		points: web3,
		jobs:   []Job{job("a", last(1)), job("b", last(3))},
		steps:  []string{"run b", "run a", "delete b", "run a"},
		want:   []string{"m3"},
	}, {
		name:   "a disabled job still protects what it keeps",
		points: web3,
		jobs:   []Job{job("a", last(1)), job("b", last(3))},
		steps:  []string{"run b", "disable b", "run a"},
		want:   []string{"m1", "m2", "m3"},
	}, {
		name:   "a job whose source is gone holds what it selects",
		points: web3,
		jobs:   []Job{job("a", last(1)), job("b", last(3))},
		steps:  []string{"run b", "lose-source b", "run a"},
		want:   []string{"m1", "m2", "m3"},
		// The operator learns why a's retention did not thin the target.
		wantWarn: `copy job b selects: its source gone cannot be opened`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			repos := map[string]*repository.Repository{"main": f.src, "second": f.second, "offsite": f.dst}
			labels := map[string]string{} // "repository id:point id" -> label
			for _, p := range tc.points {
				r := repos[p.repo]
				pt := commitPoint(t, r, p.vm, p.job, t0.Add(-p.age))
				labels[r.Config().ID+":"+pt.ID] = p.label
			}
			for _, j := range tc.jobs {
				put(t, f, j)
			}
			f.start(t)
			ctx := context.Background()
			var lastRun Run
			for _, s := range tc.steps {
				op, id, _ := strings.Cut(s, " ")
				switch op {
				case "run":
					lastRun = f.runNow(t, id)
					if lastRun.State != RunSucceeded {
						t.Fatalf("%s: %+v", s, lastRun)
					}
				case "delete":
					f.runner.Deleted(id)
					if err := f.store.DeleteJob(ctx, id); err != nil {
						t.Fatal(err)
					}
				case "disable", "lose-source":
					j, err := f.store.Job(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if op == "disable" {
						j.Enabled = false
					} else {
						j.Source = "gone"
					}
					if err := f.store.PutJob(ctx, j); err != nil {
						t.Fatal(err)
					}
				default:
					t.Fatalf("bad step %q", s)
				}
			}
			if got := targetLabels(t, f.dst, labels); !slices.Equal(got, sorted(tc.want)) {
				t.Fatalf("target holds %v, want %v (last run %+v)", got, sorted(tc.want), lastRun)
			}
			if tc.wantWarn != "" && !slices.ContainsFunc(lastRun.Warnings, func(w string) bool { return strings.Contains(w, tc.wantWarn) }) {
				t.Fatalf("last run's warnings %q lack %q", lastRun.Warnings, tc.wantWarn)
			}
			// A second round: no churn.
			jobs, err := f.store.Jobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				r := f.runNow(t, j.ID)
				if j.Source == "gone" {
					if r.State != RunFailed {
						t.Fatalf("job %s without its source: %+v", j.ID, r)
					}
					continue
				}
				if r.State != RunSucceeded || r.PointsCopied != 0 || r.PointsRemoved != 0 || r.BytesSent != 0 {
					t.Fatalf("second round, job %s: %+v", j.ID, r)
				}
			}
			if got := targetLabels(t, f.dst, labels); !slices.Equal(got, sorted(tc.want)) {
				t.Fatalf("after the second round the target holds %v, want %v", got, sorted(tc.want))
			}
		})
	}
}

// targetLabels returns the labels of the target's points, sorted: a copy
// by its source point, an original by itself.
func targetLabels(t *testing.T, dst *repository.Repository, labels map[string]string) []string {
	t.Helper()
	pts, err := dst.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pts {
		key := dst.Config().ID + ":" + p.ID
		if s := p.Tags[repository.CopySourceTag]; s != "" {
			key = s
		}
		l, ok := labels[key]
		if !ok {
			l = "unknown " + key
		}
		out = append(out, l)
	}
	return sorted(out)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// Two jobs into one target running at the same time: the target still
// ends with one copy of each point their keep sets hold, and a further
// round changes nothing.
func TestSharedTargetConcurrentRuns(t *testing.T) {
	f := newFixture(t)
	var want []string
	for i := range 4 {
		p := commitPoint(t, f.src, "web", "nightly", t0.Add(time.Duration(i-4)*time.Hour))
		if i > 0 {
			want = append(want, p.ID)
		}
	}
	put(t, f, job("a", func(j *Job) { j.Retention = policy.Retention{Last: 1} }))
	put(t, f, job("b", func(j *Job) { j.Retention = policy.Retention{Last: 3} }))
	// Both first runs open the target before either reads it.
	b := &barrierRepos{Repos: f.runner.cfg.Repos, target: "offsite", n: 2, all: make(chan struct{})}
	cfg := f.runner.cfg
	cfg.Repos = b
	f.runner = New(cfg)
	f.start(t)
	for round := range 3 {
		ids := map[string]string{}
		for _, j := range []string{"a", "b"} {
			id, err := f.runner.RunNow(context.Background(), j)
			if err != nil {
				t.Fatal(err)
			}
			ids[j] = id
		}
		for j, id := range ids {
			r := f.waitRun(t, j, id)
			if r.State != RunSucceeded || (round > 0 && (r.PointsCopied != 0 || r.PointsRemoved != 0)) {
				t.Fatalf("round %d, job %s: %+v", round, j, r)
			}
		}
		pts, err := f.dst.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		prefix := f.src.Config().ID + ":"
		for _, p := range pts {
			got = append(got, strings.TrimPrefix(p.Tags[repository.CopySourceTag], prefix))
		}
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Fatalf("round %d: the target holds copies of %v, want %v", round, got, want)
		}
	}
}

// barrierRepos holds the first n lookups of the target until all n came
// (or a few seconds passed), so that n runs read the target together.
type barrierRepos struct {
	Repos
	target string
	n      int
	mu     sync.Mutex
	seen   int
	all    chan struct{}
}

func (b *barrierRepos) Repo(name string) (*repository.Repository, error) {
	if name == b.target {
		b.mu.Lock()
		b.seen++
		first, last := b.seen <= b.n, b.seen == b.n
		b.mu.Unlock()
		if last {
			close(b.all)
		}
		if first {
			select {
			case <-b.all:
			case <-time.After(5 * time.Second):
			}
		}
	}
	return b.Repos.Repo(name)
}
