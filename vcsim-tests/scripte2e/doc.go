// Package scripte2e tests a job's appliance-side scripts end to end: the
// policy.Scheduler on a fake clock running a job through the real backup
// runner (service/backups) against the vCenter lab (vcsim-tests/lab) into a
// real repository, with real processes for the scripts. What vCenter saw
// (snapshot requests) and what the repository holds are read from the lab
// and the repository, never from the code under test. It holds tests only.
package scripte2e
