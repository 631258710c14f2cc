package images

import "crypto/tls"

// insecureTLS skips certificate verification (Options.Insecure).
func insecureTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for with Options.Insecure
}
