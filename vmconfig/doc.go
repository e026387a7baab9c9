// Package vmconfig defines the VM configuration captured at backup time and
// stored as JSON in every VM restore point's Config blob
// (repository.Point.ConfigID): CPUs, memory, firmware, guest, controllers,
// disks at their controller and unit, NICs and their networks.
//
// It is the contract between the backup engine (which writes it) and the
// restore engine (which rebuilds a VM from it), so neither has to import the
// other. The JSON is byte-identical to what backup.EncodeVMConfig wrote in
// version 1 (testdata/backup-v1.json pins it).
//
// vmconfig imports nothing of vmvault's.
package vmconfig
