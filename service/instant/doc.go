// Package instant owns instant VM recovery's export of a restore point:
// the point's disks as files an ESXi host (or any NFS v3 client) can read
// and write in place, without restoring them first (issue 25).
//
// A Session is one exported point: a directory holding, per disk, a
// monolithicFlat descriptor NAME.vmdk (disk/vmdk.FlatDescriptor) and its
// extent NAME-flat.vmdk, whose bytes are the disk as `appliance image
// restore` writes it (repository.DiskReader, every blob verified), and,
// when the point has a VM configuration (vmconfig), the VM's NAME.vmx
// regenerated from it. Files are the size of their disk and readable at
// any offset.
//
// Only the -flat.vmdk files are writable: writes go to the session's
// copy-on-write overlay on local disk (service/instant/overlay), never to
// the repository; reads merge the overlay over the repository's bytes.
// Descriptors and the .vmx are read-only (a client rewriting a descriptor
// could point the extent elsewhere). The point's files can be neither
// removed, renamed nor truncated; of their attributes only the flat
// files' times may be set. Any other name is a scratch file (ESXi's lock
// files, logs, swap), kept in the session directory, capped.
// go-nfs answers every WRITE as FILE_SYNC, so every write is made durable
// (data, then map) before it is answered; concurrent writes share fsyncs.
//
// A Session's state lives in its directory (session.json: point, export
// path, file handle key; the overlays; scratch/: the files clients created
// beside the point's, scratch.go), so a restarted process reopens the same
// export path, the same file handles and what clients wrote.
//
// A Server serves sessions over NFS v3 (github.com/willscott/go-nfs, which
// also answers MOUNT v3 MNT/UMNT/NULL on the same port) behind an RPC
// front (rpcfront.go) that answers what go-nfs would get wrong: other
// versions and programs, credentials other than AUTH_SYS and AUTH_NULL,
// MOUNT EXPORT/DUMP (empty lists: export paths are secrets), procedures
// it lacks; it joins fragmented records and lowers FSINFO's transfer
// sizes from go-nfs's 1 GiB to 1 MiB. Only allow-listed
// client addresses get answers (checked on accept and again in MOUNT).
// Each session is mounted by a random unguessable
// export path; its file handles carry the session's random id and an
// HMAC-SHA256 under the session's key, so a handle cannot be forged into
// another session or guessed. service/instant/portmap answers the
// portmapper (RFC 1833 v2) for clients that ask it for the ports.
//
// instant reads repositories and writes nothing to them; it never drives
// an engine, vCenter or the daemon.
package instant
