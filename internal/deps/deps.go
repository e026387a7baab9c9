//go:build tools

// Package deps pins the module's chosen dependencies before the code that uses them lands.
package deps

import (
	_ "github.com/gin-gonic/gin"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/restic/chunker"
	_ "github.com/vmware/govmomi"
	_ "github.com/vmware/govmomi/simulator"
	_ "go.etcd.io/bbolt"
	_ "golang.org/x/crypto/argon2"
	_ "golang.org/x/sync/errgroup"
)
