// Package settings keeps what the console edits in the daemon's state
// database, bucket "settings": the general preferences (api.Settings: time
// zone, event retention) as one JSON value under key "settings", the
// encoding web has always written, so existing state.db files still read;
// the sections that override the configuration file (keys "vcenter",
// "smtp", "maintenance"), and the repositories added from the console (key
// "repositories"). Passwords are sealed (Sealer: AES-256-GCM under the key
// file settings.key in the state directory, mode 0600) and never stored in
// clear; repository passphrases are files the daemon writes, referenced by
// path as the configuration file does.
package settings
