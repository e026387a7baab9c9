package storage_test

import (
	"testing"

	"github.com/vmvault/vmvault/repository/storage"
	"github.com/vmvault/vmvault/repository/storage/storagetest"
)

func TestLocalConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Storage { return storage.NewLocal(t.TempDir(), false) })
}
