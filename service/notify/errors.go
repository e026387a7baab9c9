package notify

import "errors"

// Sentinel errors callers branch on.
var (
	// ErrConfig: an SMTPConfig or Config is invalid (the message names the field).
	ErrConfig = errors.New("invalid mail configuration")
	// ErrNoSTARTTLS: STARTTLS is required and the server does not offer it;
	// nothing (no credentials, no message) was sent.
	ErrNoSTARTTLS = errors.New("the SMTP server does not offer STARTTLS")
	// ErrAuth: the server refused the username and password.
	ErrAuth = errors.New("SMTP authentication failed")
	// ErrRejected: the server refused the sender, a recipient or the message
	// permanently (5xx).
	ErrRejected = errors.New("the SMTP server refused the message")
	// ErrTemporary: the server kept answering with a transient (4xx) failure
	// or could not be reached, after every attempt.
	ErrTemporary = errors.New("temporary SMTP failure")
)
