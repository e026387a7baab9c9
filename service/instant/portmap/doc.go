// Package portmap owns the portmapper of an instant export: an RFC 1833
// (ONC RPC program 100000) version 2 server over TCP and UDP answering
// PMAPPROC_NULL, GETPORT and DUMP from a fixed table of mappings (MOUNT
// and NFS version 3 on the NFS server's port). SET, UNSET and CALLIT are
// refused (PROC_UNAVAIL): the table belongs to the process that started
// the server, and CALLIT is an amplification vector. Versions 3 and 4
// (rpcbind) get PROG_MISMATCH 2..2, other programs PROG_UNAVAIL.
//
// Every call is decoded from untrusted bytes with explicit bounds (the
// fuzz target in fuzz_test.go): garbage yields GARBAGE_ARGS or silence,
// never a panic. It imports nothing of vmvault's.
package portmap
