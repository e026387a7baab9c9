// Package feed connects the notifier (package notify) to the rest of the
// appliance: the mail switch that replaces the notifier live when the
// console saves new mail settings, the wrappers that alert on the backups,
// restores and checks started through the API (the scheduler's own alert
// through its events, Observe), and the daily report's Source over the
// state database, the repositories, the inventory and the copy jobs.
//
// It is a package of its own because notify must stay free of what it
// reports on (the archtest rule notify-reads-interfaces keeps repository,
// vsphere and the engines out of it): the adapters that know a repository's
// check report or the state database live here, beside it, and notify
// reads them through its own interfaces. Like every service it must never
// import web, cmd or the daemon; the interfaces it wraps are web's, spelt
// again over web/api's types. It reads what happened and never makes it
// happen: no engine, no vCenter, no inventory adapter (the archtest rule
// notify-feed-no-engines); the inventory comes in as policy.Inventory. The
// daemon builds the notifier from its configuration and wires these.
package feed
