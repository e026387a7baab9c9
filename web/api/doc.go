// Package api holds the data types of vmvault's REST API that the service
// packages fill and web serves (restore points, repositories and their
// statistics, the event filter, settings, backups, restores, copy jobs,
// the vSphere inventory tree, restore targets and tags, the vCenter
// connection test), the error kinds services return for web to map to
// status codes, and nothing else: no behaviour beyond a finding's text,
// and no import of an engine, so that web and the services (service/repos,
// records, settings, topology, ...) can share these types while web
// depends on none of them.
package api
