// Package httpurl checks the base URLs rlvr is given for the servers it
// calls: OpenAI-compatible endpoints, experts and Tinker services.
package httpurl

import "net/url"

// Valid reports whether s is an absolute http:// or https:// URL with a
// host.
func Valid(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
