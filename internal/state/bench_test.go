package state

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/policy"
)

// BenchmarkOpenVerify measures what verification costs the daemon's start
// and a copy: Open and WriteCopy of a state.db holding 100,000 events
// (90 days of a busy appliance).
func BenchmarkOpenVerify(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.db")
	d, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	fillEvents(b, d)
	d.Close()
	fi, _ := os.Stat(path)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		d, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		open := time.Since(start)
		start = time.Now()
		if _, err := d.WriteCopy(CopiesDir(path), t0); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(open.Seconds(), "open-s")
		b.ReportMetric(time.Since(start).Seconds(), "copy-s")
		b.ReportMetric(float64(fi.Size())/(1<<20), "db-MiB")
		d.Close()
	}
}

// fillEvents writes 100,000 events into d (90 days of a busy appliance),
// in transactions of 1,000.
func fillEvents(b *testing.B, d *DB) {
	b.Helper()
	for batch := range 100 {
		err := d.Bolt().Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket(bEvents)
			for i := range 1000 {
				n := uint64(batch*1000 + i)
				e := policy.Event{Time: t0.Add(time.Duration(n) * time.Minute), Kind: "vm-backed-up", Severity: policy.SeverityInfo,
					Job: "nightly", VM: fmt.Sprintf("vm-%d", n%500), Message: fmt.Sprintf("backed up to restore point %016x (123456789 bytes read, 1234567 stored)", n)}
				if err := putRecord(bk, binary.BigEndian.AppendUint64(timeKey(e.Time), n), e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
