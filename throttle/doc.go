// Package throttle is client-side adaptive throttling (Google SRE book,
// ch. 21), with fast recovery.
package throttle
