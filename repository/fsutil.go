package repository

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vmvault/vmvault/internal/failpoint"
)

// fileSteps names the failpoints of one writeFileAtomic caller; constant
// strings, so that a disabled failpoint costs nothing.
type fileSteps struct{ write, fsync, rename, dirsync string }

var (
	configSteps = fileSteps{"config.write", "config.fsync", "config.rename", "config.dirsync"}
	recordSteps = fileSteps{"record.write", "record.fsync", "record.rename", "record.dirsync"}
)

// writeFileAtomic writes name via name.tmp: write, fsync, rename, fsync dir.
func writeFileAtomic(name string, data []byte, doSync bool) error {
	return writeFileSteps(configSteps, name, data, doSync)
}

func writeFileSteps(fp fileSteps, name string, data []byte, doSync bool) error {
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := failpoint.Hit(fp.write); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if doSync {
		err := failpoint.Hit(fp.fsync)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			os.Remove(tmp)
			return fmt.Errorf("fsync %s: %w", tmp, err)
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := failpoint.Hit(fp.rename); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	if doSync {
		if err := failpoint.Hit(fp.dirsync); err != nil {
			return fmt.Errorf("fsync dir of %s: %w", name, err)
		}
		return syncDir(filepath.Dir(name))
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
