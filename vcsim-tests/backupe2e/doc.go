// Package backupe2e holds the backup engine's end-to-end tests: real
// repositories in temporary directories, VMs in the vcsim lab
// (vcsim-tests/lab), every restore point read back and compared with the
// disk as it was when its snapshot was taken.
package backupe2e
