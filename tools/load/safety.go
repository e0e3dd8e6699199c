package load

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// CheckTarget refuses a target URL whose host is not on the loopback
// network (127.0.0.0/8, ::1, localhost) unless allow names that host
// exactly: load is sent only where its sender means it to go. A host name
// other than localhost is not resolved: it must be allowed by name.
func CheckTarget(rawURL string, allow []string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("load: target %q: %w", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("load: target %q: want an http:// or https:// URL", rawURL)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("load: target %q has no host", rawURL)
	}
	for _, a := range allow {
		if strings.EqualFold(a, host) {
			return nil
		}
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("load: target host %q is not on loopback; name it with --allow-host %s to send load there", host, host)
}
