package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testCert writes a self-signed certificate for 127.0.0.1 named cn, and
// its key, into dir, and returns the certificate.
func testCert(t *testing.T, dir, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Written whole and renamed into place, as a renewal tool does.
	write := func(name, typ string, b []byte) {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("cert.pem", "CERTIFICATE", der)
	write("key.pem", "PRIVATE KEY", kb)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestServeTLS: with --tls-cert and --tls-key the server speaks HTTPS with
// that certificate, and after SIGHUP with the files' new one, while it
// goes on serving.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	first := testCert(t, dir, "first")
	p := startServe(t, "--db", filepath.Join(dir, "serve.db"), "--script", writeScript(t, dir, `{"content": [{"type": "text", "text": "hello"}]}`),
		"--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"))
	if !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("the server listens on %s, want https", p.url)
	}
	// served asks for /healthz trusting cert alone, and returns the
	// certificate the server showed.
	served := func(cert *x509.Certificate) (string, error) {
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		resp, err := c.Get(p.url + "/healthz")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "ok\n" {
			t.Errorf("/healthz: %d %q", resp.StatusCode, body)
		}
		return resp.TLS.PeerCertificates[0].Subject.CommonName, nil
	}
	if got, err := served(first); err != nil || got != "first" {
		t.Fatalf("before SIGHUP: %q, %v; want the first certificate", got, err)
	}
	if resp, err := http.Get("http://" + strings.TrimPrefix(p.url, "https://") + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP was served beside TLS")
		}
	}
	second := testCert(t, dir, "second")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The reload is the signal handler's, after the signal: ask until the
	// new certificate is served, or the server stops (a SIGHUP it did not
	// handle would have killed it).
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := served(second)
		if err == nil && got == "second" {
			break
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the server exited on SIGHUP: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGHUP: %q, %v; want the second certificate", got, err)
		}
	}
}
