package linux

// systemBundles are where distributions keep the system CA bundle.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
	"/etc/ssl/cert.pem",                  // Alpine
}

// hostCAFile is the CA file the host's own clients trust: SSL_CERT_FILE
// when set, else the first system bundle that exists ("" when none does).
func hostCAFile(getenv func(string) string) string {
	if p := getenv("SSL_CERT_FILE"); p != "" {
		return p
	}
	for _, p := range systemBundles {
		if fileExists(p) {
			return p
		}
	}
	return ""
}
