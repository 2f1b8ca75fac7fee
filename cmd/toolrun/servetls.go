package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// certFiles is the certificate of --tls-cert and --tls-key, read again on
// SIGHUP: a renewed certificate (certbot, cert-manager) is taken without a
// restart, so runs in flight and their streams go on. A reload that fails
// (a file half written, a key that does not match) keeps the certificate
// being served and logs why.
type certFiles struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// loadCert reads the certificate and key files once, so that a server with
// a wrong pair does not start.
func loadCert(certFile, keyFile string) (*certFiles, error) {
	c := &certFiles{certFile: certFile, keyFile: keyFile}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the files again and serves what they hold from the next
// handshake on.
func (c *certFiles) reload() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert.Store(&cert)
	return nil
}

// config is the TLS configuration of the server: TLS 1.2 at least, HTTP/2
// offered, the certificate as last loaded.
func (c *certFiles) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cert.Load(), nil
		},
	}
}

// reloadOnHUP reloads c at each SIGHUP until ctx ends.
func (c *certFiles) reloadOnHUP(ctx context.Context, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := c.reload(); err != nil {
					log.Error("toolrun serve: reloading the TLS certificate; the one loaded before is still served", "err", err)
					continue
				}
				log.Info("toolrun serve: reloaded the TLS certificate", "cert", c.certFile)
			}
		}
	}()
}
