package repository

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParseLocation(t *testing.T) {
	tests := []struct {
		in                      string
		local, endpoint, bucket string
		prefix                  string
		secure                  bool
		wantErr                 error // nil: any error when errText
		errText                 bool
	}{
		{in: "/srv/repo", local: "/srv/repo"},
		{in: "relative/dir", local: "relative/dir"},
		{in: "./s3:http:", local: "./s3:http:"},
		{in: "s3:http://127.0.0.1:9000/bucket", endpoint: "127.0.0.1:9000", bucket: "bucket"},
		{in: "s3:https://s3.example.com/vm-backups/site-a/app1/", endpoint: "s3.example.com", bucket: "vm-backups", prefix: "site-a/app1", secure: true},
		{in: "sftp:host:/x", wantErr: ErrUnknownScheme},
		{in: "b2:bucket", wantErr: ErrUnknownScheme},
		{in: "file:/tmp/x", wantErr: ErrUnknownScheme},
		{in: "s3:ftp://h/bucket", errText: true},
		{in: "s3:http:///bucket", errText: true},
		{in: "s3:http://key:secret@h/bucket", errText: true},
		{in: "s3:http://h/ab", errText: true},
		{in: "s3:http://h/Bucket", errText: true},
		{in: "s3:http://h/bucket/../x", errText: true},
		{in: "", errText: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			l, err := ParseLocation(tt.in)
			if tt.wantErr != nil || tt.errText {
				if err == nil {
					t.Fatalf("ParseLocation(%q) = %+v, want an error", tt.in, l)
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Local != tt.local {
				t.Fatalf("local %q, want %q", l.Local, tt.local)
			}
			if tt.bucket == "" {
				if l.S3 != nil {
					t.Fatalf("unexpected S3 target %+v", l.S3)
				}
				return
			}
			if l.S3 == nil || l.S3.Endpoint != tt.endpoint || l.S3.Bucket != tt.bucket || l.S3.Prefix != tt.prefix || l.S3.Secure != tt.secure {
				t.Fatalf("S3 target %+v, want %s %s %q secure=%v", l.S3, tt.endpoint, tt.bucket, tt.prefix, tt.secure)
			}
		})
	}
}

// An unknown scheme used to become a local directory named "sftp:host:"
// (or "s3:http:" before S3 existed): Init and Open refuse it and create
// nothing.
func TestUnknownSchemeRefusedAndCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ctx := context.Background()
	loc := "sftp://backup.example.com/repo"
	if err := Init(ctx, loc, []byte("pw"), InitOptions{Chunker: TestChunker, NoEncryption: true}); !errors.Is(err, ErrUnknownScheme) {
		t.Fatalf("Init(%q) = %v, want ErrUnknownScheme", loc, err)
	}
	if _, err := Open(ctx, loc, nil, OpenOptions{}); !errors.Is(err, ErrUnknownScheme) {
		t.Fatalf("Open(%q) = %v, want ErrUnknownScheme", loc, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused location created %v", ents)
	}
	// The escape for a directory whose name has a colon still works.
	local := "./sftp:weird"
	if err := Init(ctx, local, nil, InitOptions{Chunker: TestChunker, NoEncryption: true}); err != nil {
		t.Fatalf("Init(%q): %v", local, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sftp:weird", "config")); err != nil {
		t.Fatal(err)
	}
}
