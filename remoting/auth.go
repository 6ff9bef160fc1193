package remoting

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"sort"

	"github.com/hourglass-mq/hourglass/access"
)

// The fields RocketMQ's AclClientRPCHook adds to every request.
const (
	aclAccessKey     = "AccessKey"
	aclSignature     = "Signature"
	aclSecurityToken = "SecurityToken"
)

// authorize authenticates a request and records its principal on it: the
// access key of its ACL signature, which must verify with that principal's
// secret (package access: a file principal's derived secret, or the
// -auth-token for any other access key), or, unsigned, the subject of the
// connection's verified client certificate. The signature is the base64
// HMAC-SHA1, keyed by the secret, of every extFields value but the
// signature's, in the order of their names, then the body. The Go client
// leaves a security token out of what it signs, the Java client does not:
// both are accepted.
func (s *Server) authorize(c *conn, req *Command) error {
	if s.access.Open() {
		req.principal = access.Anonymous
		return nil
	}
	sig, ok := req.ExtFields[aclSignature]
	ak := req.ExtFields[aclAccessKey]
	if !ok || ak == "" {
		if p, ok := c.certPrincipal(s.access); ok {
			req.principal = p
			return nil
		}
		return errors.New("this broker requires ACL credentials: sign requests with an AclClientRPCHook (access key and secret key)")
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return errors.New("the request's signature is not base64")
	}
	p, secret, known := s.access.SigningSecret(ak)
	for _, withToken := range []bool{true, false} {
		if known && hmac.Equal(got, sign(req, secret, withToken)) {
			req.principal = p
			return nil
		}
	}
	return errors.New("the request's signature does not verify with the secret key of its access key")
}

func sign(req *Command, secret string, withToken bool) []byte {
	names := make([]string, 0, len(req.ExtFields))
	for k := range req.ExtFields {
		if k == aclSignature || (k == aclSecurityToken && !withToken) {
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	mac := hmac.New(sha1.New, []byte(secret))
	for _, k := range names {
		mac.Write([]byte(req.ExtFields[k]))
	}
	mac.Write(req.Body)
	return mac.Sum(nil)
}

// certPrincipal is the file principal named by the subject common name of
// the connection's client certificate, when TLS verified one.
func (c *conn) certPrincipal(st *access.Store) (*access.Principal, bool) {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil, false
	}
	cs := tc.ConnectionState()
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil, false
	}
	return st.Named(cs.VerifiedChains[0][0].Subject.CommonName)
}
