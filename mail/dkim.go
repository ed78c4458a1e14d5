package mail

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/emersion/go-msgauth/dkim"
)

// dkimHeaders are the header fields signed (RFC 6376 section 5.4.1). A name listed once
// more than the message has it signs that it is absent, so the fields a reader trusts
// most are listed twice ("oversigned"): nobody on the way can add a second From or
// Subject without breaking the signature.
var dkimHeaders = []string{"From", "From", "Subject", "Subject", "To", "To", "Cc", "Cc", "Reply-To", "Reply-To",
	"Date", "Date", "Message-ID", "Message-ID", "In-Reply-To", "References", "MIME-Version", "Content-Type",
	"Content-Transfer-Encoding", "Auto-Submitted"}

// DKIM signs outgoing mail for the domain of its From address with one key and selector,
// published by the operator as a TXT record at <selector>._domainkey.<domain>.
type DKIM struct {
	Selector string
	signer   crypto.Signer
}

// LoadDKIM reads a PEM private key (RSA in PKCS #1 or PKCS #8, or Ed25519 in PKCS #8).
func LoadDKIM(keyFile, selector string) (*DKIM, error) {
	if selector == "" || strings.ContainsAny(selector, " \t;=") {
		return nil, fmt.Errorf("dkim: selector %q is not a DNS label", selector)
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("dkim: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("dkim: %s holds no PEM block", keyFile)
	}
	var key any
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("dkim: %s: unsupported PEM block %q (want RSA PRIVATE KEY or PRIVATE KEY)", keyFile, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("dkim: %s: %w", keyFile, err)
	}
	return NewDKIM(key, selector)
}

// NewDKIM returns a signer for an *rsa.PrivateKey (at least 1024 bits) or an
// ed25519.PrivateKey.
func NewDKIM(key any, selector string) (*DKIM, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < 1024 {
			return nil, errors.New("dkim: RSA keys shorter than 1024 bits are refused by receivers")
		}
		return &DKIM{Selector: selector, signer: k}, nil
	case ed25519.PrivateKey:
		return &DKIM{Selector: selector, signer: k}, nil
	}
	return nil, fmt.Errorf("dkim: unsupported key type %T", key)
}

// DNSRecord is the TXT record value that publishes the public key.
func (d *DKIM) DNSRecord() string {
	switch k := d.signer.Public().(type) {
	case *rsa.PublicKey:
		der, _ := x509.MarshalPKIXPublicKey(k)
		return "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der)
	case ed25519.PublicKey:
		return "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(k)
	}
	return ""
}

// Sign returns raw with a DKIM-Signature header field prepended, signed for the domain of
// the From address.
func (d *DKIM) Sign(raw []byte) ([]byte, error) {
	p, err := Parse(raw)
	if err != nil || p.From == "" {
		return nil, errors.New("dkim: message has no From address")
	}
	domain := p.From[strings.LastIndexByte(p.From, '@')+1:]
	opts := &dkim.SignOptions{
		Domain: domain, Selector: d.Selector, Signer: d.signer, Hash: crypto.SHA256,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed, BodyCanonicalization: dkim.CanonicalizationRelaxed,
		HeaderKeys: dkimHeaders,
	}
	var out bytes.Buffer
	out.Grow(len(raw) + 512)
	if err := dkim.Sign(&out, bytes.NewReader(raw), opts); err != nil {
		return nil, fmt.Errorf("dkim: %w", err)
	}
	return out.Bytes(), nil
}
