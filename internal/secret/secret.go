// Package secret checks a presented secret, such as an API key or a
// bearer token, against the expected one without telling anything of the
// expected one through the comparison's timing.
package secret

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Key is an expected secret. It holds only the secret's SHA-256 digest:
// comparing digests of equal length keeps the comparison constant-time in
// the secret's length too.
type Key struct {
	digest [sha256.Size]byte
}

// NewKey returns the Key of secret.
func NewKey(secret string) Key {
	return Key{sha256.Sum256([]byte(secret))}
}

// Matches reports whether presented is the key's secret.
func (k Key) Matches(presented string) bool {
	d := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(d[:], k.digest[:]) == 1
}
