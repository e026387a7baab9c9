package lab

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"strings"
	"time"
)

// DemoOptions configures StartDemo.
type DemoOptions struct {
	// Dir is a scratch directory for the sample VMs' images (created).
	Dir string
	// VMs is the number of sample VMs (DefaultSampleVMs), each with a
	// DiskSize-byte disk.
	VMs      int
	DiskSize int64
	// Password is the lab's vCenter password ("" = a random one).
	Password string
	// TagCategory and Tag are given to every sample VM but the files-NN
	// ones (so a tag-based selection has something to leave out), or to
	// the first when there is no other.
	TagCategory, Tag string
	// Started, when set, sees the lab once the sample VMs exist, before
	// they are tagged.
	Started func(*Lab, []Sample)
}

// StartDemo starts the lab `appliance demo` runs against: the simulator's
// default VPX inventory (its VMs keep small empty disks) plus the sample
// VMs, with real file systems on their disks, tagged. Close the lab.
func StartDemo(ctx context.Context, o DemoOptions) (*Lab, []Sample, error) {
	if o.VMs < 1 {
		return nil, nil, fmt.Errorf("lab: demo needs at least one sample VM, not %d", o.VMs)
	}
	pw := o.Password
	if pw == "" {
		b := make([]byte, 18)
		_, _ = rand.Read(b)
		pw = fmt.Sprintf("%x", b)
	}
	l, err := Start(ctx, Options{DiskCapacity: 4 << 20, Password: pw})
	if err != nil {
		return nil, nil, fmt.Errorf("start the lab: %w", err)
	}
	samples, err := l.startDemo(ctx, o)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, samples, nil
}

func (l *Lab) startDemo(ctx context.Context, o DemoOptions) ([]Sample, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("lab scratch directory: %w", err)
	}
	samples, err := l.AddSampleVMs(ctx, o.Dir, DefaultSampleVMs(o.VMs, o.DiskSize))
	if err != nil {
		return nil, fmt.Errorf("sample VMs: %w", err)
	}
	if o.Started != nil {
		o.Started(l, samples)
	}
	if o.TagCategory == "" || o.Tag == "" {
		return samples, nil
	}
	var tagged []string
	for _, s := range samples {
		if !strings.HasPrefix(s.Name, "files-") {
			tagged = append(tagged, s.MoRef)
		}
	}
	if len(tagged) == 0 {
		tagged = []string{samples[0].MoRef}
	}
	if err := l.TagVMs(ctx, o.TagCategory, o.Tag, tagged...); err != nil {
		return nil, fmt.Errorf("tag sample VMs: %w", err)
	}
	return samples, nil
}

// ChurnEvery makes every sample VM write a few blocks (Churn) each
// interval until ctx ends, so incremental backups have something to do.
// Failures are logged, not fatal: a guest write may meet a snapshot being
// removed.
func (l *Lab) ChurnEvery(ctx context.Context, samples []Sample, every time.Duration, log *slog.Logger) {
	log.Info("demo: the sample VMs write a little data at every interval", "interval", every)
	var seed [16]byte
	_, _ = rand.Read(seed[:])
	rng := mrand.New(mrand.NewPCG(binary.BigEndian.Uint64(seed[:8]), binary.BigEndian.Uint64(seed[8:])))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range samples {
			n, err := l.Churn(s, rng, 2+rng.IntN(4))
			if err != nil {
				log.Warn("demo: guest writes", "vm", s.Name, "err", err)
				continue
			}
			log.Debug("demo: guest wrote", "vm", s.Name, "bytes", n)
		}
	}
}
