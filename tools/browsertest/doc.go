// Package browsertest holds the checks of levee's pages that need a real
// browser: the status page (leveehttp.StatusHandler) loaded in headless
// Chromium under a scripted overload. It sits with the tools so that the
// library's module does not carry a browser driver; it has no API.
package browsertest
