package jail

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"os"

	"github.com/jailsh/jail/proxy"
)

// WriteCABundle writes path, the bundle the jailed clients trust: the
// certificates of hostFile (the host's CAs, "" for none), then the jail CA
// of caPath. Only CERTIFICATE blocks are copied, so whatever else a
// misnamed SSL_CERT_FILE holds never reaches the jail.
func WriteCABundle(path, caPath, hostFile string) error {
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		return fmt.Errorf("reading the jail CA: %w", err)
	}
	var buf bytes.Buffer
	if hostFile != "" {
		b, err := os.ReadFile(hostFile)
		if err != nil {
			return fmt.Errorf("reading the host's CA bundle %s: %w", hostFile, err)
		}
		buf.Write(certBlocks(b))
	}
	buf.Write(certBlocks(caPEM))
	if err := proxy.WriteFileAtomic(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the CA bundle: %w", err)
	}
	return nil
}

// certBlocks re-encodes the CERTIFICATE blocks of b, dropping the rest.
func certBlocks(b []byte) []byte {
	var out bytes.Buffer
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return out.Bytes()
		}
		if blk.Type == "CERTIFICATE" {
			pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: blk.Bytes})
		}
	}
}
