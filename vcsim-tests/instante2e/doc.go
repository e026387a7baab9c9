// Package instante2e runs instant VM recovery end to end in the lab: a
// backed-up VM is exported over NFS by the appliance's server, mounted by
// the lab's hosts through a real NFS client, registered, powered on (the
// lab reads its boot sectors through NFS), moved to production storage
// with Storage vMotion (every byte copied through the export) or stopped,
// also across an appliance restart.
package instante2e
