// Package settings keeps the appliance-wide preferences the console edits
// (api.Settings: time zone, event retention) in the daemon's state
// database: one JSON value under key "settings" of bucket "settings", the
// encoding web has always written, so existing state.db files still read.
package settings
