// Package backup is the backup engine: it turns disks into restore points.
//
// It joins the two pure layers below it: dedup cuts a disk into chunks and
// repository stores them. The disk pipeline (WriteDisk) reads a source through
// the chunker, hashes, compresses and seals chunks in a bounded pool of
// workers, and returns the disk map to commit. Sources are anything with
// io.ReaderAt: an image file today (appliance image backup), a vSphere
// snapshot reader later.
//
// backup never imports restore, policy, web or cmd.
package backup
