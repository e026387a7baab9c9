package repos

import (
	"context"
	"fmt"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/repository"
)

// InitRequest is a new repository's settings as `appliance repo init` and
// the demo choose them. Zero values take the defaults, except Algorithm.
type InitRequest struct {
	NoEncryption bool
	// Algorithm is the chunker: dedup.AlgorithmCDC or dedup.AlgorithmFixed.
	Algorithm string
	// Polynomial is the CDC polynomial; nil: a random one. Another
	// repository's makes the same chunks (copies dedup against it).
	Polynomial *uint64
	// ChunkSize is the average (CDC) or fixed chunk size; 0 keeps
	// dedup.DefaultAvgSize. The CDC bounds keep the default proportions.
	ChunkSize        int
	PackSize         int    // 0: the repository's default
	CompressionLevel string // "": the repository's default
	KDFTime          uint32 // Argon2id passes; 0: repository.DefaultKDF's
	KDFMemoryKiB     uint32 // Argon2id memory; 0: repository.DefaultKDF's
	ObjectLock       *repository.ObjectLock
	// IDFunction is the blob id function of an encrypted repository
	// (repository.IDMACBLAKE3 or IDMACHMACSHA256); "": the default.
	// HMAC-SHA-256 keeps the repository readable by vmvault before format
	// 1.3, for a copy target that an older appliance must read.
	IDFunction string
	// CreateBucket lets an s3: repository's missing bucket be created
	// (with Object Lock when ObjectLock is set); without it a mistyped
	// bucket is an error, not a new bucket.
	CreateBucket bool
	// MultiWriter makes a repository several appliances write at once
	// (format 2.0; readers before it refuse the repository).
	MultiWriter bool
}

// Init creates the repository at dir (encrypted with pw unless
// NoEncryption) and returns the chunker parameters it stored. A chunker
// the request makes invalid fails before anything is written, with an
// error that wraps dedup.ErrInvalidParams.
func Init(ctx context.Context, dir string, pw []byte, req InitRequest) (dedup.Params, error) {
	p, err := dedup.DefaultParams()
	if err != nil {
		return p, err
	}
	p.Algorithm = req.Algorithm
	if req.Polynomial != nil {
		p.Polynomial = *req.Polynomial
	}
	if req.ChunkSize > 0 {
		p.AvgSize, p.MinSize, p.MaxSize = req.ChunkSize, req.ChunkSize/2, req.ChunkSize*8
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("chunker: %w", err)
	}
	kdf := repository.DefaultKDF
	if req.KDFTime > 0 {
		kdf.Time = req.KDFTime
	}
	if req.KDFMemoryKiB > 0 {
		kdf.MemoryKiB = req.KDFMemoryKiB
	}
	opts := repository.InitOptions{
		NoEncryption:     req.NoEncryption,
		Chunker:          ChunkerConfig(p),
		KDF:              kdf,
		PackSize:         req.PackSize,
		CompressionLevel: req.CompressionLevel,
		ObjectLock:       req.ObjectLock,
		IDMAC:            req.IDFunction,
		MultiWriter:      req.MultiWriter,
		CreateBucket:     req.CreateBucket,
	}
	return p, repository.Init(ctx, dir, pw, opts) // its errors say "init DIR"
}

// ChunkerConfig is p as the repository's config stores it.
func ChunkerConfig(p dedup.Params) repository.ChunkerConfig {
	return repository.ChunkerConfig{Algorithm: p.Algorithm, Polynomial: p.Polynomial, MinSize: p.MinSize, AvgSize: p.AvgSize, MaxSize: p.MaxSize}
}
