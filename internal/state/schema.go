package state

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/internal/state/schema"
)

// The schema as Open applies it. internal/state/schema declares every
// bucket, the value formats and the migrations from older versions
// (FORMAT.md describes them); Open checks the version before anything else
// (a newer file is refused untouched), verifies every value against the
// file's own version (walk, valueRule), then upgrades it in one
// transaction (initSchema).

// SchemaVersion is the layout this package reads and writes.
const SchemaVersion = schema.Version

// The bucket and key names this package uses; schema declares them all.
var (
	bMeta        = schema.BucketMeta
	bJobs        = schema.BucketJobs
	bRuns        = schema.BucketRuns
	bRunsByJob   = schema.BucketRunsByJob
	bRunsOpen    = schema.BucketRunsOpen
	bVMState     = schema.BucketVMState
	bMaintenance = schema.BucketMaintenance
	bEvents      = schema.BucketEvents
	bScheduler   = schema.BucketScheduler
	bNotify      = schema.BucketNotify
	bSettings    = schema.BucketSettings

	kSchema          = schema.KeySchema
	kCheckpoint      = schema.KeyCheckpoint
	kLastDailyReport = schema.KeyLastDailyReport
	kSettings        = schema.KeySettings
)

// schemaErr maps schema's errors to this package's sentinels.
func schemaErr(err error) error {
	if err == nil || errors.Is(err, ErrSchemaTooNew) || !errors.Is(err, schema.ErrFormat) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

func fileVersion(tx *bolt.Tx) (uint32, error) {
	v, err := schema.FileVersion(tx)
	return v, schemaErr(err)
}

func schemaNotNewer(tx *bolt.Tx) error {
	v, err := fileVersion(tx)
	if err != nil {
		return err
	}
	if v > SchemaVersion {
		return fmt.Errorf("state db schema %d, this program knows %d (left untouched): %w", v, SchemaVersion, ErrSchemaTooNew)
	}
	return nil
}

// initSchema creates every declared bucket and migrates the file to
// SchemaVersion, all in tx.
func initSchema(tx *bolt.Tx) error {
	if err := failpoint.Hit("state.open"); err != nil {
		return err
	}
	return schemaErr(schema.Upgrade(tx))
}

// valueRule is the check walk applies to the values of top-level bucket
// name in a file of the given version; nil checks nothing.
func valueRule(version uint32, name string) func([]byte) error {
	return schema.ValueRule(version, name)
}
