package images

import "crypto/tls"

// insecureTLS skips certificate verification (--insecure).
func insecureTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for with --insecure
}
