// Package appsettings owns what the console's Settings page changes over
// the configuration file: the vCenter connection, the mail server and the
// maintenance window (Service.Sections, Save*, ResetSection, TestSMTP:
// web.ApplianceSettings), and the repositories added from the console and
// their removal (AddRepository, CanRemove, RemoveRepository:
// web.RepositoryAdder and web.RepositoryRemover), with the passphrase
// files it writes for them. The sections are kept in service/settings'
// store; which applies, the console's or the configuration file's, is
// decided here (MaintenanceEffective; the vCenter and mail sections through
// Config.VCenter and Mail, which know the configuration file's form).
//
// What it changes of the running appliance goes through Config: the mail
// notifier (Mail), the scheduler's maintenance window (Scheduler), the
// daemon's and the backup engine's repositories (Opened, Forget,
// AddBackups, RemoveBackups) and the saver of the configuration (Changed).
// The daemon builds the Config.
package appsettings
