package feed

import (
	"context"
	"sync"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/web/api"
)

// Alerter is what the API's wrappers tell the notifier.
type Alerter interface {
	Fail(notify.Failure)
	Succeeded(notify.Failure)
}

// MailSwitch is the daemon's notifier, replaced live when the console
// saves new mail settings: the old one stops (sending what it holds) and
// the new one starts. Without one every call is a no-op and SendTest
// answers api.ErrSMTPNotConfigured.
type MailSwitch struct {
	mu     sync.Mutex
	cur    *notify.Notifier
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *MailSwitch) get() *notify.Notifier {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

func (m *MailSwitch) Fail(f notify.Failure)       { m.get().Fail(f) }
func (m *MailSwitch) Succeeded(f notify.Failure)  { m.get().Succeeded(f) }
func (m *MailSwitch) ObserveEvent(e policy.Event) { m.get().ObserveEvent(e) }

// SendTest implements web.Mailer.
func (m *MailSwitch) SendTest(ctx context.Context, to string) error {
	n := m.get()
	if n == nil {
		return api.ErrSMTPNotConfigured
	}
	return n.SendTest(ctx, to)
}

// Swap starts n (nil: no mail) in place of the current notifier, then
// stops that one, which sends its pending alerts first.
func (m *MailSwitch) Swap(n *notify.Notifier) {
	m.mu.Lock()
	oldCancel, oldDone := m.cancel, m.done
	m.cur, m.cancel, m.done = n, nil, nil
	if n != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = n.Run(ctx)
		}()
		m.cancel, m.done = cancel, done
	}
	m.mu.Unlock()
	if oldCancel != nil {
		oldCancel()
		<-oldDone
	}
}

// Observe returns an OnEvent observer that feeds nt, then next.
func Observe(nt *MailSwitch, next func(policy.Event)) func(policy.Event) {
	return func(e policy.Event) {
		nt.ObserveEvent(e)
		if next != nil {
			next(e)
		}
	}
}
