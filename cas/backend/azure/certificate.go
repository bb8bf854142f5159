package azure

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

// clientCertificate is a service principal's certificate and its RSA
// key, which sign the assertion a token request carries in place of a
// secret.
type clientCertificate struct {
	cert *x509.Certificate
	key  *rsa.PrivateKey
}

// loadCertificate reads a PEM file holding the certificate and its
// unencrypted RSA key (PKCS #8 or PKCS #1), as AZURE_CLIENT_CERTIFICATE_PATH
// names it. PKCS #12 files need a library the standard one lacks.
func loadCertificate(path string) (*clientCertificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c clientCertificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		switch block.Type {
		case "CERTIFICATE":
			if c.cert == nil {
				if c.cert, err = x509.ParseCertificate(block.Bytes); err != nil {
					return nil, fmt.Errorf("its certificate: %w", err)
				}
			}
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("its key: %w", err)
			}
			rk, ok := k.(*rsa.PrivateKey)
			if !ok {
				return nil, errors.New("its key is not an RSA key (Microsoft Entra ID takes only those)")
			}
			c.key = rk
		case "RSA PRIVATE KEY":
			if c.key, err = x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
				return nil, fmt.Errorf("its key: %w", err)
			}
		}
	}
	if c.cert == nil || c.key == nil {
		return nil, errors.New("want a PEM file holding the certificate and its unencrypted RSA key (PKCS #12 is not supported: convert it with openssl pkcs12 -nodes)")
	}
	if pub, ok := c.cert.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&c.key.PublicKey) {
		return nil, errors.New("the key is not the certificate's")
	}
	return &c, nil
}

// assertion is the JWT that proves the client holds c's key, for a token
// request to tokenURL: RS256, the certificate named by its SHA-1
// thumbprint (x5t), valid for ten minutes from now.
func (c *clientCertificate) assertion(clientID, tokenURL string, now time.Time) (string, error) {
	thumb := sha1.Sum(c.cert.Raw)
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "x5t": base64.RawURLEncoding.EncodeToString(thumb[:])})
	if err != nil {
		return "", err
	}
	var jti [16]byte
	rand.Read(jti[:])
	claims, err := json.Marshal(map[string]any{"aud": tokenURL, "iss": clientID, "sub": clientID, "jti": hex.EncodeToString(jti[:]),
		"nbf": now.Unix(), "iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix()})
	if err != nil {
		return "", err
	}
	signed := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, c.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
