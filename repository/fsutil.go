package repository

import (
	"github.com/vmvault/vmvault/repository/storage"
)

// fileSteps names the failpoints of one durable write; constant strings,
// so that a disabled failpoint costs nothing. The backend hits them at the
// matching step of its protocol (storage.Steps).
type fileSteps = storage.Steps

var (
	configSteps = fileSteps{Write: "config.write", Fsync: "config.fsync", Rename: "config.rename", Dirsync: "config.dirsync"}
	recordSteps = fileSteps{Write: "record.write", Fsync: "record.fsync", Rename: "record.rename", Dirsync: "record.dirsync"}
	packSteps   = fileSteps{Fsync: "pack.fsync", Rename: "pack.rename", Dirsync: "pack.dirsync"}
)

// syncDir fsyncs a local directory (the catalog's).
func syncDir(dir string) error { return storage.SyncDir(dir) }
