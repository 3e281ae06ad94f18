package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
)

// testPKI is a CA of the test's own and a server certificate it signed for
// "localhost" only, in PEM.
type testPKI struct {
	caPEM, certPEM, keyPEM []byte
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Sluice test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return testPKI{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

// TestPostgresTLS connects, through the RDS-secret path the Lambdas take
// (DB_SECRET_ARN, DB_SSLMODE, DB_SSLROOTCERT), to a real PostgreSQL serving
// TLS with a certificate from a CA of the test's own. The default
// (verify-full against the system roots and the RDS bundle) refuses it, as
// it refuses any server that is not RDS; naming the CA in DB_SSLROOTCERT
// verifies it, host name included; require, the explicit opt-out,
// encrypts without verifying. Before, the default was require: any
// certificate was accepted (pgx InsecureSkipVerify).
func TestPostgresTLS(t *testing.T) {
	pki := newTestPKI(t)
	srv := pgtest.StartServer(t, pgtest.WithTLS(pki.certPEM, pki.keyPEM))
	caFile := filepath.Join(t.TempDir(), "test-ca.pem")
	if err := os.WriteFile(caFile, pki.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	secret := func(host string) string {
		return fmt.Sprintf(`{"username":"postgres","password":"unused","host":%q,"port":%d,"dbname":"postgres"}`, host, srv.Port())
	}
	secrets := fakeSecrets{dbARN: secret("localhost"), dbARN + "-ip": secret("127.0.0.1")}

	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" connects, over TLS
	}{
		{"default refuses a CA outside the bundle", Config{DBSecretARN: dbARN}, "certificate signed by unknown authority"},
		{"verify-full refuses it too", Config{DBSecretARN: dbARN, DBSSLMode: "verify-full"}, "certificate signed by unknown authority"},
		{"verify-ca refuses it", Config{DBSecretARN: dbARN, DBSSLMode: "verify-ca"}, "certificate signed by unknown authority"},
		{"DB_SSLROOTCERT trusts the CA", Config{DBSecretARN: dbARN, DBSSLRootCert: caFile}, ""},
		{"verify-full checks the host name", Config{DBSecretARN: dbARN + "-ip", DBSSLRootCert: caFile}, "127.0.0.1"},
		{"verify-ca does not", Config{DBSecretARN: dbARN + "-ip", DBSSLMode: "verify-ca", DBSSLRootCert: caFile}, ""},
		{"require opts out of verification", Config{DBSecretARN: dbARN, DBSSLMode: "require"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkTLS(t, tc.cfg, secrets, tc.wantErr) })
	}
}

// TestRDSCABundle: the bundle built in, when the build has it, is a
// published version (its SHA-256 and certificate count), every certificate
// in it a self-signed Amazon RDS root valid for decades, each region's
// three G1 roots included; and a connection that verifies trusts every one
// of them, from an RDS secret or a DATABASE_URL, while one that names its
// own root file trusts only that. Without it (a build that did not run
// make rds-ca), a verifying connection still verifies, against the system
// roots.
func TestRDSCABundle(t *testing.T) {
	var certs []*x509.Certificate
	if RDSCABundle == nil {
		t.Logf("no rdsca/global-bundle.pem in this build (make rds-ca fetches it): only the trust without it is checked")
	} else {
		sum := sha256.Sum256(RDSCABundle)
		want, ok := RDSCABundleDigests[hex.EncodeToString(sum[:])]
		if !ok {
			t.Fatalf("SHA-256 of rdsca/global-bundle.pem = %x, not a published version", sum)
		}
		var err error
		if certs, err = x509.ParseCertificates(pemBlocks(t, RDSCABundle)); err != nil {
			t.Fatal(err)
		}
		if len(certs) != want {
			t.Errorf("bundle holds %d certificates, want %d", len(certs), want)
		}
		names := map[string]bool{}
		for _, c := range certs {
			cn := c.Subject.CommonName
			names[cn] = true
			if !c.IsCA || c.Subject.String() != c.Issuer.String() || c.CheckSignatureFrom(c) != nil {
				t.Errorf("%s: not a self-signed CA", cn)
			}
			if !strings.HasPrefix(cn, "Amazon RDS ") || c.Subject.Organization[0] != "Amazon Web Services, Inc." {
				t.Errorf("%q (%s): not an Amazon RDS root", cn, c.Subject.Organization)
			}
			if c.NotAfter.Before(time.Date(2061, 1, 1, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("%s expires %s", cn, c.NotAfter)
			}
		}
		for _, region := range []string{"us-east-1", "eu-west-1", "ap-southeast-2", "sa-east-1", "il-central-1", "mx-central-1"} {
			for _, kind := range []string{"RSA2048", "RSA4096", "ECC384"} {
				if cn := "Amazon RDS " + region + " Root CA " + kind + " G1"; !names[cn] {
					t.Errorf("bundle lacks %s", cn)
				}
			}
		}
	}

	pki := newTestPKI(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pki.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(pemBlocks(t, pki.caPEM))
	if err != nil {
		t.Fatal(err)
	}
	secrets := fakeSecrets{dbARN: `{"username":"u","password":"p","host":"db.abc.eu-west-1.rds.amazonaws.com","port":5432}`}
	for _, tc := range []struct {
		name    string
		cfg     Config
		ownRoot bool // trusts the test CA alone
	}{
		{"secret, default verify-full", Config{DBSecretARN: dbARN}, false},
		{"secret, verify-ca", Config{DBSecretARN: dbARN, DBSSLMode: "verify-ca"}, false},
		{"url, verify-full", Config{DatabaseURL: "postgres://u:p@db.abc.eu-west-1.rds.amazonaws.com/x?sslmode=verify-full"}, false},
		{"secret, own root file", Config{DBSecretARN: dbARN, DBSSLRootCert: caFile}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := postgresConfig(t.Context(), tc.cfg, secrets)
			if err != nil {
				t.Fatal(err)
			}
			tlsc := pc.ConnConfig.TLSConfig
			if tlsc == nil || tlsc.InsecureSkipVerify && tlsc.VerifyPeerCertificate == nil {
				t.Fatalf("TLS config %+v does not verify", tlsc)
			}
			roots := tlsc.RootCAs
			if roots == nil {
				t.Fatal("no RootCAs: pgx would trust the system roots alone")
			}
			trusted := 0
			for _, c := range certs {
				if _, err := c.Verify(x509.VerifyOptions{Roots: roots}); err == nil {
					trusted++
				}
			}
			_, caErr := ca.Verify(x509.VerifyOptions{Roots: roots})
			switch {
			case tc.ownRoot && (trusted != 0 || caErr != nil):
				t.Errorf("with DB_SSLROOTCERT: %d of the bundle's roots trusted, the file's CA: %v; want none and it", trusted, caErr)
			case !tc.ownRoot && (trusted != len(certs) || caErr == nil):
				t.Errorf("%d of the bundle's %d roots trusted, a foreign CA trusted: %v; want all, and not it", trusted, len(certs), caErr == nil)
			}
		})
	}
}

// pemBlocks returns the DER bytes of every PEM block in b, concatenated.
func pemBlocks(t *testing.T, b []byte) []byte {
	t.Helper()
	var der []byte
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			t.Fatalf("a %s block in the bundle", block.Type)
		}
		der = append(der, block.Bytes...)
	}
	if len(strings.TrimSpace(string(b))) != 0 {
		t.Fatalf("bytes after the last PEM block: %q", b)
	}
	return der
}
