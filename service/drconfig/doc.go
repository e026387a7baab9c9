// Package drconfig owns the appliance's disaster-recovery copy of its
// configuration: the jobs, copy jobs, settings, the users' names and roles
// and the repositories' names and locations (never a password, hash, token
// or passphrase), saved as JSON (SavedConfig, format SavedConfigFormat)
// into every repository after each change (Saver, told by Events about the
// audit events that record one; Repository.SaveApplianceConfig encrypts it
// under the repository's keys), and the import that reads it back on a
// fresh state directory (Appliance.Import: `appliance serve
// --import-config REPO`), recreating the users too: local ones without a
// password (an administrator sets it before they can sign in), vCenter
// ones as they were.
//
// What it reads and writes of the appliance comes through Appliance: the
// job, copy job, settings and user stores as small interfaces, the
// configuration file's repositories as a list and the open repositories
// as a func. The daemon builds it and runs the Saver.
package drconfig
