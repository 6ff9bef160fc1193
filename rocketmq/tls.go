package rocketmq

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The self-signed certificate's files, in the directory given to
// SelfSignedTLS (the server passes <data-dir>/grpc-tls):
//
//	cert.pem  PEM "CERTIFICATE": ECDSA P-256, valid 10 years from creation,
//	          names localhost, 127.0.0.1, ::1 and the listening host
//	key.pem   PEM "EC PRIVATE KEY" (mode 0600)
//
// They are made once, on the first start, and reused after: a client that
// pinned the certificate keeps working across restarts. The official
// clients do not check the certificate by default.
const (
	certFile = "cert.pem"
	keyFile  = "key.pem"
)

// LoadTLS returns a server TLS configuration from a PEM certificate and key.
func LoadTLS(certPath, keyPath string) (*tls.Config, error) {
	c, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("gRPC TLS certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}, nil
}

// SelfSignedTLS returns a server TLS configuration with the self-signed
// certificate kept in dir, making it (and dir) if missing. host is the
// listening host, added to the certificate's names.
func SelfSignedTLS(dir, host string) (*tls.Config, error) {
	cp, kp := filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
	if _, err := os.Stat(cp); errors.Is(err, fs.ErrNotExist) {
		if err := makeSelfSigned(dir, host); err != nil {
			return nil, fmt.Errorf("gRPC TLS: self-signed certificate in %s: %w", dir, err)
		}
	}
	return LoadTLS(cp, kp)
}

func makeSelfSigned(dir, host string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "hourglass"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if host != "" && ip == nil {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The key first: a crash between the two leaves no certificate, so the
	// next start makes both again.
	if err := writeFile(filepath.Join(dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// writeFile writes data to path through a synced temporary file and a
// rename, so that path is either absent or whole.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
