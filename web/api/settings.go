package api

// Settings are the appliance-wide preferences the console edits.
type Settings struct {
	TimeZone           string `json:"timeZone"`           // IANA name, e.g. "Europe/Paris"
	EventRetentionDays int    `json:"eventRetentionDays"` // events older than this are pruned
}
